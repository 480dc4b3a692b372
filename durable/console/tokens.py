"""The API tokens page: a user makes (the token shown once), lists and revokes their own tokens; a holder of
durable.manage_apitoken does so for everyone."""
from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from durable.console.fields import ReasonField
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.labels import LabelledForm
from durable.permissions import signed_in
from durable.tokens import MANAGE, create_token, revoke_token, token_lifetime, visible_tokens

LISTED = 200


class TokenForm(LabelledForm, forms.Form):
    name = forms.CharField(max_length=100, help_text="what holds it: a service, a script, a CI job")
    days = forms.IntegerField(min_value=1, max_value=3650, required=False, label="Expires in (days)")
    owner = forms.CharField(max_length=150, required=False, label="For user",
                            help_text="leave empty for yourself; another user needs durable.manage_apitoken")


class RevokeForm(LabelledForm, forms.Form):
    reason = ReasonField()


@login_required
@never_cache  # the answer to a creation holds the token: no cache keeps it
@require_http_methods(["GET", "HEAD", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """Every logged-in user may manage their own tokens: a token grants no more than its owner holds."""
    if request.method != "POST":
        return _page(request, TokenForm(initial={"days": int(token_lifetime().days)}))
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    data = form.cleaned_data
    owner = _owner(request, form, data["owner"])
    if owner is None:
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    expires_at = timezone.now() + timedelta(days=data["days"]) if data["days"] else None
    try:
        row, token = create_token(user=owner, name=data["name"], expires_at=expires_at, by=request.user,
                                  source="console")
    except Forbidden as exc:
        raise PermissionDenied(str(exc)) from None
    except InvalidInput as exc:
        for name, errors in exc.errors.items():
            form.add_error(name if name in form.fields else None, errors)
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    # Shown on this answer only: the database keeps its hash, so no page can show it again.
    return _page(request, TokenForm(initial={"days": int(token_lifetime().days)}), created=row, token=token,
                 status=HTTPStatus.CREATED)


@login_required
@require_POST
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    form = RevokeForm(request.POST)
    if not form.is_valid():
        return _page(request, TokenForm(), revoke_errors=form.errors, status=HTTPStatus.BAD_REQUEST)
    try:
        row = revoke_token(token_id=token_id, by=request.user, source="console", reason=form.cleaned_data["reason"])
    except Forbidden as exc:
        raise PermissionDenied(str(exc)) from None
    except Conflict as exc:
        return _page(request, TokenForm(), problem=f"Nothing was done: {exc}.", status=HTTPStatus.CONFLICT)
    messages.success(request, f"API token {row.prefix}… ({row.name}) is revoked: calls that present it now get 401.")
    return redirect("durable:tokens")


def _owner(request: HttpRequest, form: TokenForm, username: str) -> Any:
    if not username or username == request.user.get_username():
        return request.user
    if not request.user.has_perm(MANAGE):
        raise PermissionDenied("you may create API tokens for yourself only; managing other people's tokens "
                               "needs the durable.manage_apitoken permission")
    owner = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username}).first()
    if owner is None:
        form.add_error("owner", f"no user is called {username!r}; nothing was created")
    return owner


def _page(request: HttpRequest, form: TokenForm, *, status: int = HTTPStatus.OK, **context: Any) -> HttpResponse:
    listed = list(visible_tokens(by=signed_in(request.user))[:LISTED + 1])
    context = {"form": form, "tokens": listed[:LISTED], "more": len(listed) > LISTED, "now": timezone.now(),
               "manages_all": request.user.has_perm(MANAGE), "revoke_form": RevokeForm(), **context}
    if status == HTTPStatus.BAD_REQUEST and "problem" not in context:
        context["problem"] = "Nothing was done: correct the form below."
    return render(request, "durable/tokens.html", context, status=status)
