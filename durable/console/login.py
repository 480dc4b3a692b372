"""The console's login page. Lockout is django-axes' at every login form (durable.lockout renders its 429 here)."""
from __future__ import annotations

from django.contrib.auth.views import LoginView

from durable.lockout import CONSOLE_TEMPLATE

# With no ?next=, the console opens on its overview wherever it is mounted, whatever the host's LOGIN_REDIRECT_URL.
login = LoginView.as_view(template_name=CONSOLE_TEMPLATE, next_page="durable:overview")
