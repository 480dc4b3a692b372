"""Demo people: an operator and a reviewer who log in to the console, and an intake service with a token.

Runs are started by `intake` (the system that receives claims), never by the people who
approve them: the user who started a run cannot approve it, and refunds over 1,000 need
two different approvers (operator and reviewer).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Permission, User
from django.db.models import Q
from rest_framework.authtoken.models import Token

DEMO_USERNAME = "operator"
REVIEWER_USERNAME = "reviewer"
INTAKE_USERNAME = "intake"
DEMO_PASSWORD = "durable-demo"

VIEW = ("durable.view_run", "durable.view_sideeffect", "approvals.view_approvalrequest")
OPERATE = ("durable.cancel_run", "durable.retry_run", "durable.resume_run", "durable.migrate_run",
           "durable.resolve_sideeffect")
DECIDE = ("approvals.decide_approvalrequest",)
PEOPLE = {
    DEMO_USERNAME: VIEW + OPERATE + DECIDE,
    REVIEWER_USERNAME: VIEW + DECIDE,
    INTAKE_USERNAME: ("durable.view_run", "durable.start_run"),
}


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
    user.is_staff = password is not None and username == DEMO_USERNAME
    user.save()
    user.user_permissions.set(_permissions(PEOPLE[username]))
    return user


def ensure_demo_people() -> DemoPeople:
    """Create (or reset) the demo's users; returns them and the intake service's API token."""
    operator = _person(DEMO_USERNAME, password=DEMO_PASSWORD)
    reviewer = _person(REVIEWER_USERNAME, password=DEMO_PASSWORD)
    intake = _person(INTAKE_USERNAME, password=None)
    token, _ = Token.objects.get_or_create(user=intake)
    return DemoPeople(operator, reviewer, intake, token.key)
