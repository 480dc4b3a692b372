"""The console's login page, throttled like every other login form (durable.login_throttle)."""
from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from durable.login_throttle import throttle_logins


def _refused(request: HttpRequest) -> HttpResponse:
    view = LoginView(request=request)
    return TemplateResponse(request, "registration/login.html",
                            view.get_context_data(form=view.get_form_class()(request), throttled=True), status=429)


login = throttle_logins(LoginView.as_view(), source="console", refused=_refused)
