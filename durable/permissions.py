"""Who sees a run's contents: its checkpoints' state, its journal (recorded LLM and tool results) and its ledger rows.

One rule, called by every endpoint and screen that serves any of them (the run API and the operations API,
the run page, the checkpoint page, the reconciliation screens, the audit trail's operation entries, the
admin), so no way in is more generous than another. `durable.view_run` alone shows a run's status and
metadata, never its contents.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

# Each of the three tables' own view permission: no way in shows a table's rows to someone lacking it.
CONTENTS_PERMISSIONS = ("durable.view_checkpoint", "durable.view_journalentry", "durable.view_sideeffect")
View = Callable[..., HttpResponse]
REFUSED = ("you may see runs but not their contents (checkpoints, journal, ledger): that needs the "
           "view_checkpoint, view_journalentry and view_sideeffect permissions (any console role holds them)")


def can_see_contents(user: AbstractBaseUser | AnonymousUser | None) -> bool:
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


def permission_required(permission: str) -> Callable[[View], View]:
    """Django's `permission_required(..., raise_exception=True)`, with a 403 that names the missing permission
    (the security log writes that reason beside the refusal, durable.middleware.RefusalLogMiddleware)."""

    def decorator(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.has_perm(permission):
                raise PermissionDenied(f"this needs the {permission} permission, which your account lacks")
            return view(request, *args, **kwargs)

        return guarded

    return decorator
