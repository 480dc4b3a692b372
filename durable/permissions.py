"""Who sees a run's contents: its checkpoints' state, its journal (recorded LLM and tool results) and its ledger rows.

One rule, called by every endpoint and screen that serves any of them (the run API and the operations API,
the run page, the checkpoint page, the reconciliation screens, the audit trail's operation entries, the
admin), so no way in is more generous than another. `durable.view_run` alone shows a run's status and
metadata, never its contents.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeAlias, TypeVar, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

# Who a service acts for, in annotations: a person, or request.user (a person or AnonymousUser). django-stubs
# types request.user and every user foreign key with the model AUTH_USER_MODEL names (auth.User in the
# standalone project), so the annotations name it; a host's own model answers the same calls (get_username,
# has_perm: AbstractBaseUser with PermissionsMixin, as the roles already need).
Person: TypeAlias = User
Caller: TypeAlias = User | AnonymousUser



def signed_in(user: Caller) -> Person:
    """request.user behind login_required or IsAuthenticated, as the person it is. Anonymous callers never get
    this far; a view that lost its guard is refused rather than acting for nobody."""
    if not user.is_authenticated:
        raise PermissionDenied("sign in first")
    return user


# Each of the three tables' own view permission: no way in shows a table's rows to someone lacking it.
CONTENTS_PERMISSIONS = ("durable.view_checkpoint", "durable.view_journalentry", "durable.view_sideeffect")
View = Callable[..., HttpResponseBase]
Guarded = TypeVar("Guarded", bound=View)  # a guarded view keeps its own signature
REFUSED = ("you may see runs but not their contents (checkpoints, journal, ledger): that needs the "
           "view_checkpoint, view_journalentry and view_sideeffect permissions (any console role holds them)")


def can_see_contents(user: Caller | None) -> bool:
    """Whether `user` may read checkpoint state, journal entries and ledger rows, through any endpoint."""
    return bool(user is not None and user.is_authenticated and user.has_perms(CONTENTS_PERMISSIONS))


def contents_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A console view that serves contents: login first, then the rule (403 naming what is missing)."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_see_contents(request.user):
            raise PermissionDenied(REFUSED)
        return view(request, *args, **kwargs)

    return login_required(guarded)


def permission_required(permission: str) -> Callable[[Guarded], Guarded]:
    """Django's `permission_required(..., raise_exception=True)`, with a 403 that names the missing permission
    (the security log writes that reason beside the refusal, durable.middleware.RefusalLogMiddleware)."""

    def decorator(view: Guarded) -> Guarded:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not request.user.has_perm(permission):
                raise PermissionDenied(f"this needs the {permission} permission, which your account lacks")
            return view(request, *args, **kwargs)

        return cast(Guarded, guarded)

    return decorator
