"""Demo data: an operator login with every run permission, and an API token."""
from __future__ import annotations

from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

DEMO_USERNAME = "operator"
DEMO_PASSWORD = "durable-demo"
RUN_PERMISSIONS = ("view_run", "start_run", "cancel_run", "retry_run", "resume_run", "migrate_run",
                   "view_sideeffect", "resolve_sideeffect")


def ensure_demo_operator() -> tuple[User, str]:
    """Create (or reset) the demo operator; returns the user and their API token."""
    user, _ = User.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": "operator@example.com"})
    user.set_password(DEMO_PASSWORD)
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="durable",
                                                        codename__in=RUN_PERMISSIONS))
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key
