"""The operator audit trail is append-only: rows are added, never changed or removed."""
import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.test import Client
from rest_framework.test import APIClient

from durable.audit import audit
from durable.models import AppendOnly, OperatorAction
from durable.roles import ROLES
from tests.audit import operator_actions
from tests.conftest import user_with_roles
from tests.durable.claims import start_claim

pytestmark = pytest.mark.django_db


@pytest.fixture
def entry(db):
    return audit(user=None, action="cancel", run=start_claim(), source="test", status_before="PENDING",
                 status_after="CANCELLED", reason="test")


def test_an_entry_cannot_be_changed_by_saving_it_again(entry):
    entry.reason = "rewritten"
    with pytest.raises(AppendOnly):
        entry.save()
    assert OperatorAction.objects.get(pk=entry.pk).reason == "test"


def test_entries_cannot_be_changed_or_removed_in_bulk(entry):
    with pytest.raises(AppendOnly):
        OperatorAction.objects.filter(pk=entry.pk).update(reason="rewritten")
    with pytest.raises(AppendOnly):
        OperatorAction.objects.all().delete()
    with pytest.raises(AppendOnly):
        entry.delete()
    assert OperatorAction.objects.get(pk=entry.pk).reason == "test"


def test_a_new_instance_given_an_entrys_id_cannot_overwrite_it(entry):
    forged = OperatorAction(pk=entry.pk, action="approve", source="forged", reason="rewritten",
                            created_at=entry.created_at)
    with pytest.raises(IntegrityError), transaction.atomic():
        forged.save()  # always an INSERT, which the existing id refuses; never an UPDATE of the entry
    assert OperatorAction.objects.get(pk=entry.pk).reason == "test"


def test_saving_with_update_fields_or_force_update_is_refused(entry):
    fresh = OperatorAction(action="cancel", source="test")
    for options in ({"force_update": True}, {"update_fields": ["reason"]}):
        with pytest.raises(AppendOnly):
            fresh.save(**options)
    assert OperatorAction.objects.count() == 1


def test_an_upsert_cannot_rewrite_an_entry(entry):
    forged = OperatorAction(pk=entry.pk, action="approve", source="forged", reason="rewritten",
                            created_at=entry.created_at)
    with pytest.raises(AppendOnly):
        OperatorAction.objects.bulk_create([forged], update_conflicts=True, unique_fields=["id"],
                                           update_fields=["reason"])
    assert OperatorAction.objects.get(pk=entry.pk).reason == "test"


def test_bulk_update_and_the_related_managers_are_refused_too(entry):
    entry_copy = OperatorAction.objects.get(pk=entry.pk)
    entry_copy.reason = "rewritten"
    with pytest.raises(AppendOnly), transaction.atomic():
        OperatorAction.objects.bulk_update([entry_copy], ["reason"])
    with pytest.raises(AppendOnly):
        entry.run.operator_actions.update(reason="rewritten")
    with pytest.raises(AppendOnly):
        entry.run.operator_actions.all().delete()
    assert OperatorAction.objects.get(pk=entry.pk).reason == "test"


def test_removing_the_run_or_the_user_an_entry_names_is_refused(entry):
    actor = User.objects.create_user("ann")
    acted = audit(user=actor, action="retry", run=entry.run, source="test", status_before="FAILED",
                  status_after="PENDING")
    with pytest.raises(ProtectedError), transaction.atomic():
        entry.run.delete()
    with pytest.raises(ProtectedError), transaction.atomic():
        actor.delete()
    assert set(OperatorAction.objects.values_list("pk", flat=True)) == {entry.pk, acted.pk}


def test_no_api_route_serves_the_trail_and_none_answers_put_patch_or_delete(entry):
    """The trail is read in the console (/audit/, GET only: tests/durable/console/test_audit.py) and the admin
    (read-only: tests/durable/test_admin.py); the API has no route to it, and no route that changes anything
    but through POST to a service."""
    from tests.endpoints import api_routes

    assert all(getattr(r.callback.cls, "queryset", None) is None or r.callback.cls.queryset.model is not OperatorAction
               for r in api_routes())
    assert not any(r.api_methods & {"put", "patch", "delete"} for r in api_routes())
    api = APIClient()
    api.force_authenticate(user_with_roles("root", *ROLES))
    # No route to the trail at all: 404. The run's route reads only: 405, saying which methods it takes.
    for path, refused in (("/api/audit/", (404, None)), (f"/api/audit/{entry.pk}/", (404, None)),
                          (f"/api/runs/{entry.run_id}/", (405, "GET, HEAD, OPTIONS"))):
        for method in (api.put, api.patch, api.delete):
            response = method(path, {"reason": "rewritten"}, format="json")
            assert (response.status_code, response.get("Allow")) == refused, (method, path)
    assert list(operator_actions().values_list("pk", "reason")) == [(entry.pk, "test")]


def test_the_admins_bulk_delete_action_is_not_offered_for_the_trail(entry):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    changelist = "/admin/durable/operatoraction/"
    assert b"delete_selected" not in client.get(changelist).content
    response = client.post(changelist, {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"})
    assert response.status_code == 200  # the list again: with no actions offered, the POST is not one
    assert OperatorAction.objects.filter(pk=entry.pk).exists()
