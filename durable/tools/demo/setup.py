"""Demo people: an operator and a reviewer who log in to the console, and an intake service with a token.

Runs are started by `intake` (the system that receives claims), never by the people who
approve them: the user who started a run cannot approve it, and refunds over 1,000 need
two different approvers (operator and reviewer).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group, Permission, User
from django.db.models import Q

from durable.models import ApiToken
from durable.roles import ADMIN, APPROVER, WEBHOOK
from durable.tokens import create_token, revoke_token

DEMO_USERNAME = "operator"
REVIEWER_USERNAME = "reviewer"
INTAKE_USERNAME = "intake"
DEMO_PASSWORD = "durable-demo"

# The people hold roles (groups created by a migration). The intake service holds the webhook role (it sends runs
# the customers' replies its webhook receives, and reads the runs it sent to or started) and one permission more:
# it starts runs.
ROLES_OF = {DEMO_USERNAME: (ADMIN,), REVIEWER_USERNAME: (APPROVER,), INTAKE_USERNAME: (WEBHOOK,)}
INTAKE_PERMISSIONS = ("durable.start_run",)
INTAKE_TOKEN_NAME = "demo intake"


@dataclass(frozen=True)
class DemoPeople:
    operator: User
    reviewer: User
    intake: User
    intake_token: str


def _permissions(names: tuple[str, ...]) -> list[Permission]:
    query = Q()
    for name in names:
        app_label, codename = name.split(".")
        query |= Q(content_type__app_label=app_label, codename=codename)
    return list(Permission.objects.filter(query))


def _person(username: str, *, password: str | None) -> User:
    user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()  # a service: it has a token, not a login
    user.is_staff = username == DEMO_USERNAME  # the admin role may also use the Django admin
    user.save()
    user.groups.set(Group.objects.filter(name__in=ROLES_OF[username]))
    user.user_permissions.set(_permissions(INTAKE_PERMISSIONS) if username == INTAKE_USERNAME else [])
    return user


def ensure_demo_people() -> DemoPeople:
    """Create (or reset) the demo's users; returns them and a new API token for the intake service.

    Only a token's hash is kept, so each start makes a new one (printed once) and revokes the one before."""
    operator = _person(DEMO_USERNAME, password=DEMO_PASSWORD)
    reviewer = _person(REVIEWER_USERNAME, password=DEMO_PASSWORD)
    intake = _person(INTAKE_USERNAME, password=None)
    for old in ApiToken.objects.filter(user=intake, name=INTAKE_TOKEN_NAME, revoked_at__isnull=True):
        revoke_token(token_id=old.id, source="command", reason="the demo started again with a new token")
    _, token = create_token(user=intake, name=INTAKE_TOKEN_NAME, source="command")
    return DemoPeople(operator, reviewer, intake, token)
