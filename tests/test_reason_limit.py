"""A reason is never cut to fit: up to REASON_MAX_LENGTH it is kept whole, above it every console form and
every API endpoint answers 400 naming the reason and does nothing. The page shows the limit before submit.

The forms and endpoints are the ones tests/test_fuzzing.py and tests/test_hostile_input.py list (both are
checked against the URLconf), so a new one with a reason is held to the limit without being named here.
"""
from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import ApprovalDecision
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import SideEffect
from tests.audit import operator_actions
from tests.endpoints import api_target, console_target, logged_in, written
from tests.test_fuzzing import FORM_FIELDS
from tests.test_hostile_input import TEXT_FIELDS, admin, api, post_json, refusal, world  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

REASON_FORMS = sorted(name for name, fields in FORM_FIELDS.items() if "reason" in fields)
REASON_ENDPOINTS = sorted(name for name, fields in TEXT_FIELDS.items() if "reason" in fields)
WHOLE = "r" * REASON_MAX_LENGTH


def test_the_forms_and_endpoints_with_a_reason_are_found():
    # cancel/retry/resume/migrate, decide, resolve, revoke, bulk cancel/retry, raise a budget; pause a run, bulk
    # pause/resume, pause a workflow and run it again, delete a schedule, fork a run (the console); pause a run, pause
    # a workflow and run it again, delete a schedule, fork a run (the API)
    assert len(REASON_FORMS) == 17 and len(REASON_ENDPOINTS) == 15


def kept_reasons() -> list[str]:
    """Every place a reason is kept: the audit trail (every action, a revoked token too), a decision, a resolution."""
    return [*operator_actions().values_list("reason", flat=True),
            *ApprovalDecision.objects.values_list("reason", flat=True),
            *SideEffect.objects.values_list("resolution_evidence", flat=True)]


@pytest.mark.parametrize("name", REASON_FORMS)
def test_a_console_reason_over_the_limit_is_a_400_naming_it_and_does_nothing(world, admin, name):
    url, form = console_target(name, world, admin.username)
    before = written()
    response = logged_in(admin).post(url, {**form, "reason": WHOLE + "r"})
    assert response.status_code == 400
    assert f"A reason holds at most {REASON_MAX_LENGTH} characters and this one has {REASON_MAX_LENGTH + 1}" \
        in response.content.decode()
    assert written() == before


@pytest.mark.parametrize("name", REASON_FORMS)
def test_a_console_reason_at_the_limit_is_kept_whole(world, admin, name):
    url, form = console_target(name, world, admin.username)
    response = logged_in(admin).post(url, {**form, "reason": WHOLE})
    assert response.status_code < 400
    assert WHOLE in kept_reasons()


def test_line_breaks_are_counted_as_the_page_counts_them(world, admin):
    """A browser posts each line break as CRLF; the page's counter counts one, and so does the limit."""
    url, form = console_target("durable:run-cancel", world, admin.username)
    reason = "r" * (REASON_MAX_LENGTH - 3) + "\r\n" + "r\r\n"  # 4,002 characters sent, 4,000 on the page
    assert logged_in(admin).post(url, {**form, "reason": reason}).status_code == 302
    assert operator_actions().get(run=world.waiting).reason == reason.replace("\r\n", "\n").strip()


@pytest.mark.parametrize("name", REASON_ENDPOINTS)
def test_an_api_reason_over_the_limit_is_a_400_naming_it_and_does_nothing(world, api: Client, name):
    url, body = api_target(name, world)
    before = written()
    assert refusal(post_json(api, url, {**body, "reason": WHOLE + "r"}), "reason") == ""
    assert written() == before


@pytest.mark.parametrize("name", REASON_ENDPOINTS)
def test_an_api_reason_at_the_limit_is_kept_whole(world, api: Client, name):
    url, body = api_target(name, world)
    response = post_json(api, url, {**body, "reason": WHOLE})
    assert response.status_code < 400, response.content[:300]
    assert WHOLE in kept_reasons()


def test_the_form_shows_the_limit_before_anything_is_typed(world, admin):
    page = logged_in(admin).get(world.url("approvals:detail")).content.decode()
    assert f'maxlength="{REASON_MAX_LENGTH}"' in page and f"At most {REASON_MAX_LENGTH:,} characters." in page
