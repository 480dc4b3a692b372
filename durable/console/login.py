"""The console's login page. Lockout is django-axes' at every login form (durable.lockout renders its 429 here).

This module imports nothing of axes: the URLs load it in every host, and a host without "axes" in INSTALLED_APPS
gets durable.W030, not an import of axes' models."""
from __future__ import annotations

from django.contrib.auth.views import LoginView

CONSOLE_LOGIN = "durable:login"
CONSOLE_TEMPLATE = "durable/login.html"  # shipped with the app; a host project may override it

# With no ?next=, the console opens on its overview wherever it is mounted, whatever the host's LOGIN_REDIRECT_URL.
login = LoginView.as_view(template_name=CONSOLE_TEMPLATE, next_page="durable:overview")
