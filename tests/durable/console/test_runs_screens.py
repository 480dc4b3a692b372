"""The console's run screens: the runs list (with htmx filtering) and a run's history."""
import pytest
from django.test import Client
from django.urls import reverse

from durable import executor, services
from durable.engine.states import RunStatus
from durable.models import Run
from tests.conftest import make_user

pytestmark = pytest.mark.django_db



@pytest.fixture
def viewer():
    client = Client()
    client.force_login(make_user("viewer", "durable.view_run"))
    return client


def run_in(status, *, workflow="test-trivial", business_key="k"):
    run, _ = services.start_run(workflow=workflow, input={}, business_key=business_key)
    Run.objects.filter(id=run.id).update(status=status)
    return run


def runs_url():
    return reverse("durable:runs")


def detail_url(run):
    return reverse("durable:run-detail", args=[run.id])


def test_the_runs_list_is_the_console_home():
    assert runs_url() == "/"


def test_anonymous_visitors_are_sent_to_the_login_page():
    run = run_in(RunStatus.PENDING)
    for url in (runs_url(), detail_url(run)):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('login')}?next={url}"


def test_a_user_without_view_run_is_forbidden():
    run = run_in(RunStatus.PENDING)
    client = Client()
    client.force_login(make_user("outsider", "durable.start_run"))
    assert client.get(runs_url()).status_code == 403
    assert client.get(detail_url(run)).status_code == 403


def test_the_runs_list_shows_runs_with_their_status(viewer):
    run = run_in(RunStatus.WAITING_RETRY, business_key="ORD-1001")
    response = viewer.get(runs_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and "ORD-1001" in html and "WAITING_RETRY" in html
    assert detail_url(run) in html


def test_the_runs_list_says_so_when_nothing_matches(viewer):
    assert "No runs match" in viewer.get(runs_url()).content.decode()


def test_filters_narrow_the_list(viewer):
    run_in(RunStatus.FAILED, business_key="bk-failed")
    run_in(RunStatus.SUCCEEDED, business_key="bk-succeeded")
    run_in(RunStatus.SUCCEEDED, business_key="bk-third")
    html = viewer.get(runs_url(), {"status": "FAILED"}).content.decode()
    assert "bk-failed" in html and "bk-succeeded" not in html and "bk-third" not in html
    html = viewer.get(runs_url(), {"business_key": "bk-third"}).content.decode()
    assert "bk-third" in html and "bk-failed" not in html and "bk-succeeded" not in html
    html = viewer.get(runs_url(), {"status": "SUCCEEDED", "workflow": "test-trivial"}).content.decode()
    assert "bk-succeeded" in html and "bk-third" in html and "bk-failed" not in html
    html = viewer.get(runs_url(), {"workflow": "claims-agent"}).content.decode()
    assert "No runs match" in html and "bk-" not in html


def test_empty_filter_fields_do_not_filter(viewer):
    run_in(RunStatus.FAILED, business_key="failed-one")
    html = viewer.get(runs_url(), {"status": "", "workflow": "", "version": "", "business_key": ""}).content.decode()
    assert "failed-one" in html


def test_a_bad_filter_is_named_on_the_page(viewer):
    response = viewer.get(runs_url(), {"status": "DONE"})
    assert response.status_code == 200
    assert "status: unknown status DONE" in response.content.decode()


def test_an_htmx_request_gets_only_the_rows_fragment(viewer):
    run_in(RunStatus.FAILED, business_key="failed-one")
    run_in(RunStatus.SUCCEEDED, business_key="succeeded-one")
    response = viewer.get(runs_url(), {"status": "FAILED"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "<form" not in html
    assert html.lstrip().startswith("<tr>")
    assert "failed-one" in html and "succeeded-one" not in html


def test_the_run_page_shows_its_contract_checkpoints_and_journal_after_it_ran(viewer, calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="claim-7")
    executor.advance(run.id)
    response = viewer.get(detail_url(run))
    assert response.status_code == 200
    html = response.content.decode()
    assert str(run.id) in html and "claim-7" in html and "SUCCEEDED" in html
    assert response.context["run"].topology_fingerprint in html
    assert [cp.seq for cp in response.context["checkpoints"]] == [0, 1, 2, 3]
    assert "(start)" in html and "(end)" in html
    journal = [(e.kind, e.step, e.call_index, e.name) for e in response.context["journal"]]
    assert journal == [("activity", "s1", 0, "a1"), ("activity", "s2", 0, "a2"),
                       ("activity", "s3", 0, "a3"), ("activity", "s3", 1, "a4")]
    for call in ("#0 a1", "#0 a2", "#0 a3", "#1 a4"):
        assert call in html
    assert "a4-result" in html
    assert "Nothing recorded yet." not in html


def test_the_run_page_of_a_new_run_shows_checkpoint_zero_and_an_empty_journal(viewer):
    run = run_in(RunStatus.PENDING)
    html = viewer.get(detail_url(run)).content.decode()
    assert "(start)" in html and "Nothing recorded yet." in html


def test_the_run_page_shows_operator_actions(viewer):
    run = run_in(RunStatus.PENDING)
    services.cancel_run(run_id=run.id, user=make_user("olivia", "durable.cancel_run"), source="console",
                        reason="duplicate claim")
    html = viewer.get(detail_url(run)).content.decode()
    assert "olivia cancel (PENDING → CANCELLED) duplicate claim" in html


def test_an_unknown_run_is_a_404(viewer):
    assert viewer.get("/runs/00000000-0000-0000-0000-000000000000/").status_code == 404
