"""Readable data: JSON blocks, times in the operator's zone, the current error, labels, console URLs, replay reuse."""
from __future__ import annotations

import html
import json
import zoneinfo
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import import_module

import pytest
from django import forms
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from approvals.models import ApprovalRequest
from durable import services
from durable.console.timeline import Entry, EntryKind, with_gaps
from durable.engine.states import RunStatus
from durable.labels import LabelledForm, label_for
from durable.models import OperatorPreferences, Run
from durable.runtime import executor
from durable.templatetags.console_json import json_block
from durable.templatetags.console_time import duration, relative, render_when
from tests.approvals.flow import waiting_claim
from tests.conftest import make_user
from tests.durable.claims import needs_attention
from tests.durable.console.screens import detail_url, run_in

pytestmark = pytest.mark.django_db
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
NOON_UTC = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


# JSON blocks

def test_a_json_block_is_indented_highlighted_and_sorted():
    html = json_block({"b": [1, 2.5], "a": {"ok": True, "none": None, "text": "hi"}})
    assert '<span class="json-key">&quot;a&quot;</span>: {' in html
    assert '<span class="json-boolean">true</span>' in html and '<span class="json-null">null</span>' in html
    assert '<span class="json-number">2.5</span>' in html and '<span class="json-string">&quot;hi&quot;</span>' in html
    assert strip_tags(html).index("&quot;a&quot;") < strip_tags(html).index("&quot;b&quot;")
    assert 'data-copy-json' in html and "<details" not in html


def test_the_highlighted_text_is_exactly_the_indented_json_so_a_copy_parses():
    value = {"z": [{"é\u2028<\"q\">": -2e-09, "n": 10**20}], "a": [], "b": {}, "t": False}
    shown = html.unescape(strip_tags(json_block(value)))
    assert json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) in shown


@pytest.mark.parametrize("hostile", ["</script><script>alert(1)</script>", '"><img src=x onerror=alert(1)>',
                                     "<b>bold</b> & 'quoted'"])
def test_hostile_strings_stay_escaped_in_values_and_keys(hostile):
    html = str(json_block({hostile: hostile, "list": [hostile]}))
    assert "<script>" not in html and "<img" not in html and "<b>" not in html and "</script>" not in html
    assert "&lt;" in html


def test_values_json_cannot_carry_are_shown_as_strings():
    html = strip_tags(json_block({"amount": Decimal("12.50"), "at": NOON_UTC}))
    assert "&quot;12.50&quot;" in html and "2026-03-01 12:00:00.123456+00:00" in html


def test_a_large_value_starts_folded_with_its_size_said():
    html = json_block({"items": list(range(100))}, "Output")
    assert html.startswith('<details class="json-fold"><summary>Output (104 lines)</summary>')


# Times

def test_a_time_is_shown_in_the_operators_zone_to_the_second_with_the_relative_beside_it():
    with timezone.override(TOKYO):
        html = render_when(NOON_UTC, now=NOON_UTC + timedelta(days=2, hours=1))
    assert html == ('<time class="when" datetime="2026-03-01T12:00:00Z">2026-03-01 21:00:00 JST '
                    '<small class="relative">2 days ago</small></time>')


@pytest.mark.parametrize(("offset", "said"), [
    (timedelta(hours=3, minutes=10), "in 3 h"), (timedelta(seconds=-42), "42 s ago"),
    (timedelta(minutes=-5, seconds=-59), "5 min ago"), (timedelta(days=1), "in 1 day"),
    (timedelta(milliseconds=300), "just now"),
])
def test_the_relative_time_says_how_far_in_one_unit(offset, said):
    assert relative(NOON_UTC + offset, NOON_UTC) == said


@pytest.mark.parametrize(("delta", "said"), [
    (timedelta(milliseconds=42), "42 ms"), (timedelta(seconds=2.5), "2.5 s"), (timedelta(seconds=185), "3 min 5 s"),
    (timedelta(days=2, hours=4, minutes=9), "2 days 4 h"), (timedelta(hours=1, seconds=30), "1 h"),
])
def test_a_duration_is_said_in_at_most_two_units(delta, said):
    assert duration(delta) == said


def test_each_timeline_entry_carries_the_time_since_the_one_before_it():
    first = Entry(NOON_UTC, EntryKind.CHECKPOINT, "", "started")
    later = [replace(first, at=NOON_UTC + timedelta(seconds=s)) for s in (2.5, 185)]
    assert [entry.after for entry in with_gaps([first, *later])] == [
        None, timedelta(seconds=2.5), timedelta(seconds=182.5)]


def test_an_approval_shows_how_long_it_waited_for_its_decision(demo):
    run, request = waiting_claim()
    ApprovalRequest.objects.filter(id=request.id).update(
        status="REJECTED", created_at=NOON_UTC, decided_at=NOON_UTC + timedelta(hours=2, minutes=5))
    client = Client()
    client.force_login(make_user("watcher", "approvals.view_approvalrequest", "durable.view_run"))
    html = client.get(reverse("approvals:detail", args=[request.id])).content.decode()
    assert '<dt>Waited</dt><dd class="waited-for">2 h 5 min</dd>' in html
    assert "waited 2 h 5 min" in client.get(detail_url(run)).content.decode()


# The operator's time zone

@pytest.fixture
def operator():
    user = make_user("op", "durable.view_run")
    client = Client()
    client.force_login(user)
    return user, client


def test_an_operator_sets_their_time_zone_and_pages_show_times_in_it(operator):
    user, client = operator
    response = client.post(reverse("durable:preferences"), {"time_zone": "Asia/Tokyo"})
    assert response.status_code == 302 and OperatorPreferences.objects.get(user=user).time_zone == "Asia/Tokyo"
    run = run_in(RunStatus.PENDING)
    html = client.get(detail_url(run)).content.decode()
    assert timezone.localtime(run.created_at, TOKYO).strftime("%Y-%m-%d %H:%M:%S JST") in html
    assert "data-time-zone-url" not in html  # the browser is not asked again


def test_an_unknown_time_zone_is_a_400_naming_the_field(operator):
    user, client = operator
    response = client.post(reverse("durable:preferences"), {"time_zone": "Mars/Olympus_Mons"})
    assert response.status_code == 400
    assert "Time zone: “Mars/Olympus_Mons” is not a time zone this server knows" in response.content.decode()
    assert not OperatorPreferences.objects.filter(user=user).exists()


def test_the_browser_sends_its_zone_once_and_is_answered_without_a_page(operator):
    user, client = operator
    assert 'data-time-zone-url="/preferences/"' in client.get(reverse("durable:overview")).content.decode()
    response = client.post(reverse("durable:preferences"), {"time_zone": "America/New_York", "from_browser": "on"})
    assert response.status_code == 204 and OperatorPreferences.objects.get(user=user).time_zone == "America/New_York"


def test_at_login_an_operator_without_a_zone_takes_the_one_their_browser_sent():
    user = make_user("newcomer", "durable.view_run")
    client = Client()
    form = {"username": "newcomer", "password": "pw-newcomer", "time_zone": "Asia/Tokyo"}
    assert client.post(reverse("durable:login"), form).status_code == 302
    assert OperatorPreferences.objects.get(user=user).time_zone == "Asia/Tokyo"
    client.logout()
    client.post(reverse("durable:login"), {**form, "time_zone": "Europe/Paris"})  # a chosen zone is kept
    assert OperatorPreferences.objects.get(user=user).time_zone == "Asia/Tokyo"


# The current error

def test_an_error_is_shown_as_current_only_while_it_holds_the_run(calls_file):
    client = Client()
    client.force_login(make_user("reader", "durable.view_run", "durable.view_checkpoint", "durable.view_journalentry",
                                 "durable.view_sideeffect"))
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, "fail_times": 1},
                                business_key="k")
    executor.advance(run.id)
    html = client.get(detail_url(run)).content.decode()
    assert 'class="current-error"' in html and "downstream briefly unavailable" in html

    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    executor.advance(run.id)  # the retry runs s2 again, reusing a2's recorded result, and the run succeeds
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.error is None  # a finished run's error says why it failed
    html = client.get(detail_url(run)).content.decode()
    assert 'class="current-error"' not in html and "earlier-error" not in html
    assert "downstream briefly unavailable" in html  # in the timeline's retry entry
    assert "activity a2 #0 reused from history, not called again" in html


# Labels

def console_forms() -> list[type[forms.Form]]:
    """Every form class the console's apps define (the URLconf imports each view module, and so each form)."""
    import_module(settings.ROOT_URLCONF)
    found, todo = [], list(forms.Form.__subclasses__())
    while todo:
        form = todo.pop()
        todo.extend(form.__subclasses__())
        if form.__module__.split(".")[0] in ("durable", "approvals", "reconciliation") \
                and not form.__module__.startswith("durable.tools"):
            found.append(form)
    return sorted(set(found), key=lambda form: f"{form.__module__}.{form.__qualname__}")


def test_the_label_rule_sees_every_console_form():
    names = {form.__name__ for form in console_forms()}
    assert {"ActionForm", "DecisionForm", "ResolveForm", "BulkForm", "TimeZoneForm",
            "NotificationPreferencesForm"} <= names


@pytest.mark.parametrize("form", console_forms(), ids=lambda form: f"{form.__module__}.{form.__name__}")
def test_every_console_form_field_has_an_operator_facing_label(form: type[forms.Form]):
    for name, field in form.base_fields.items():
        label = field.label or (label_for(name) if issubclass(form, LabelledForm) else None)
        assert label, f"{form.__name__}.{name}: give it a label in durable.labels (and make the form a LabelledForm)"
        assert "_" not in label and label[0].isupper(), f"{name}: {label!r}"


def test_an_api_400_leads_each_message_with_the_fields_label(demo):
    run, row = needs_attention(demo)
    client = Client()
    client.force_login(make_user("resolver", "durable.view_sideeffect", "durable.resolve_sideeffect",
                                 "durable.view_checkpoint", "durable.view_journalentry"))
    response = client.post(reverse("api:operation-resolve", args=[row.operation_id]),
                           {"outcome": "succeeded", "reason": "checked"}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["external_ref"] == ["External reference: required when the operation succeeded: "
                                               "the downstream's reference"]


# The console URL of a run

def test_a_runs_api_answer_carries_its_console_page(operator):
    user, client = operator
    run = run_in(RunStatus.PENDING)
    body = client.get(reverse("api:run-detail", args=[run.id])).json()
    assert body["console_url"] == f"http://testserver/runs/{run.id}/"
    assert body["url"] == f"http://testserver/api/runs/{run.id}/"


@pytest.mark.urls("tests.durable.mounted_urls")
def test_the_console_url_holds_under_a_mount_prefix(operator):
    user, client = operator
    run = run_in(RunStatus.PENDING)
    body = client.get(f"/ops/api/runs/{run.id}/").json()
    assert body["console_url"] == f"http://testserver/ops/runs/{run.id}/"
