"""The Django admin shows every model and changes none of them."""
import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalDecision, ApprovalRequest
from durable.audit import audit
from durable.models import Checkpoint, DrillRecord, JournalEntry, OperatorAction, Run, SideEffect
from tests.audit import operator_actions
from tests.durable.claims import advance, start_claim

pytestmark = pytest.mark.django_db

OURS = ("durable", "approvals", "reconciliation")  # the packages whose apps (durable.tools among them) ship models
# Read from the apps, not listed by hand: a model added to any of them is covered without touching this file.
MODELS = sorted((model for config in apps.get_app_configs() if config.name.split(".")[0] in OURS
                 for model in config.get_models()), key=lambda m: m._meta.label)


@pytest.fixture
def staff(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def url(model, view: str, *args) -> str:
    return f"/admin/{model._meta.app_label}/{model._meta.model_name}/{view}" + "".join(f"{a}/" for a in args)


def test_every_model_is_registered():
    assert {Run, SideEffect, DrillRecord, ApprovalRequest, ApprovalDecision} <= set(MODELS)  # the apps were read
    assert [m._meta.label for m in MODELS if m not in admin.site._registry] == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_every_model_lists_and_cannot_be_added(staff, model):
    assert staff.get(url(model, "")).status_code == 200
    assert staff.get(url(model, "add/")).status_code == 403


def test_a_run_and_its_ledger_and_audit_rows_show_but_cannot_be_changed_or_deleted(staff, demo):
    run = advance(start_claim())
    action = audit(user=None, action="cancel", run=run, source="test", status_before="X", status_after="Y")
    rows = [(Run, run.pk), (SideEffect, run.side_effects.first().pk), (Checkpoint, run.checkpoints.first().pk),
            (JournalEntry, run.journal.first().pk), (OperatorAction, action.pk)]
    for model, pk in rows:
        page = staff.get(url(model, "", pk, "change"))
        assert page.status_code == 200 and b'name="_save"' not in page.content, model
        assert staff.post(url(model, "", pk, "change"), {}).status_code == 403, model
        assert staff.post(url(model, "", pk, "delete"), {"post": "yes"}).status_code == 403, model
    assert Run.objects.filter(pk=run.pk).exists() and operator_actions().filter(pk=action.pk).exists()
