"""The console's login page, throttled like every other login form (durable.login_throttle)."""
from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from durable.login_throttle import throttle_logins


TEMPLATE = "durable/login.html"  # shipped with the app; a host project may override it


def _refused(request: HttpRequest) -> HttpResponse:
    view = LoginView(request=request)
    return TemplateResponse(request, TEMPLATE,
                            view.get_context_data(form=view.get_form_class()(request), throttled=True), status=429)


# With no ?next=, the console opens on its overview wherever it is mounted, whatever the host's LOGIN_REDIRECT_URL.
login = throttle_logins(LoginView.as_view(template_name=TEMPLATE, next_page="durable:overview"), source="console",
                        refused=_refused)
