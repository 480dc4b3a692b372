"""The live reconciliation screens: the queue and an operation's page answer 304 until what they show changes."""
import pytest
from django.urls import reverse

from durable.engine.ledger import OperationStatus as Op
from durable.models import SideEffect
from durable.permissions import CONTENTS_PERMISSIONS
from reconciliation.services import resolve_operation
from tests.conftest import make_user
from tests.durable.claims import needs_attention
from tests.durable.console.screens import HTMX, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def resolver_user():
    return make_user("resolver", *CONTENTS_PERMISSIONS, "durable.resolve_sideeffect")


def poll(client, url, version):
    return client.get(url, HTTP_IF_NONE_MATCH=version, **HTMX)


def resolved(row, user):
    return resolve_operation(operation_id=row.operation_id, user=user, source="test", outcome="did_not_happen",
                             reason="the provider has no record", follow_up="fail")


def test_the_queue_is_answered_304_until_an_operation_in_it_is_resolved(demo, resolver_user):
    _, row = needs_attention(demo)
    client = client_for(resolver_user)
    url = reverse("reconciliation:operations")
    page = client.get(url)
    assert '<div id="queue-live" data-live' in page.content.decode()
    assert poll(client, url, page["ETag"]).status_code == 304
    resolved(row, resolver_user)
    answer = poll(client, url, page["ETag"])
    assert answer.status_code == 200 and row.operation_id not in answer.content.decode()


def test_an_operation_page_shows_a_resolution_made_elsewhere_at_its_next_poll(demo, resolver_user):
    _, row = needs_attention(demo)
    client = client_for(resolver_user)
    url = reverse("reconciliation:operation", args=[row.operation_id])
    version = client.get(url)["ETag"]
    assert poll(client, url, version).status_code == 304
    resolved(row, make_user("other", *CONTENTS_PERMISSIONS, "durable.resolve_sideeffect"))
    answer = poll(client, url, version)
    html = answer.content.decode()
    assert answer.status_code == 200 and SideEffect.objects.get(pk=row.pk).status != Op.UNKNOWN
    assert "by other" in html and 'action="/reconciliation/' not in html.split('id="resolution"')[1].split("</section>")[0]
