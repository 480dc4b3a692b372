"""The operator audit trail is append-only: rows are added, never changed or removed."""
import pytest

from durable.models import AppendOnly, OperatorAction
from durable.services import audit
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
