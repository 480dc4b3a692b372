"""GET /metrics: who may read it, what it lists, and that every process's counts add up."""
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from durable import metrics, services
from durable.engine.states import RunStatus
from durable.exposition import DatabaseGauges
from durable.models import Checkpoint, Run
from durable.runtime import executor
from tests.approvals.flow import waiting_claim
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

COUNTERS = ("workflow_resume_total", "checkpoint_restore_failure_total", "replayed_step_total",
            "task_result_reused_total", "workflow_version_mismatch_total", "side_effect_duplicate_prevented_total",
            "idempotency_key_hit_total", "side_effect_unknown_total", "reconciliation_total", "activity_retry_total",
            "retry_exhausted_total", "non_retryable_failure_total")
GAUGES = ("checkpoint_age_seconds", "approval_pending", "approval_oldest_pending_age_seconds",
          "side_effect_unknown_operations", "run_wait_overdue_seconds")
TOKEN = "scrape-secret"


def scrape(client=None, **headers):
    return (client or Client()).get("/metrics", **headers)


def samples(response):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


@pytest.fixture
def token(settings):
    settings.DURABLE_METRICS_TOKEN = TOKEN
    return TOKEN


def test_with_a_token_set_a_scraper_without_it_is_refused(token):
    anonymous = scrape()
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    assert scrape(HTTP_AUTHORIZATION="Bearer wrong").status_code == 403


def test_with_the_token_the_page_lists_every_metric(token):
    response = scrape(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    page = response.content.decode()
    for name in (*COUNTERS, *GAUGES, "resume_latency_seconds_bucket"):
        assert f"\n{name}" in page, name


def test_a_logged_in_viewer_may_read_it_and_a_user_without_view_run_may_not(token):
    viewer, stranger = Client(), Client()
    viewer.force_login(make_user("viewer", "durable.view_run"))
    stranger.force_login(make_user("stranger"))
    assert scrape(viewer).status_code == 200
    assert scrape(stranger).status_code == 403


def test_without_a_token_set_an_anonymous_scraper_is_refused(settings):
    settings.DURABLE_METRICS_TOKEN = ""
    assert scrape().status_code == 401
    assert scrape(HTTP_AUTHORIZATION="Bearer anything").status_code == 401  # no token is no way in


def test_counts_of_two_processes_add_up(token):
    label = (("action", "two-processes"),)
    before = samples(scrape(HTTP_AUTHORIZATION=f"Bearer {token}")).get(("side_effect_duplicate_prevented_total", label), 0)
    metrics.duplicate_prevented("two-processes")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "durable.project.settings", "DURABLE_VAR_DIR": str(django_settings.VAR_DIR)}
    env.pop("PROMETHEUS_MULTIPROC_DIR")  # the other process finds the directory through the settings alone
    subprocess.run([sys.executable, "-c", "import django; django.setup(); from durable import metrics; "
                    "metrics.duplicate_prevented('two-processes'); metrics.duplicate_prevented('two-processes')"],
                   env=env, cwd=django_settings.BASE_DIR, check=True, timeout=60)
    after = samples(scrape(HTTP_AUTHORIZATION=f"Bearer {token}"))[("side_effect_duplicate_prevented_total", label)]
    assert after - before == 3


# Gauges read from the database at scrape time


def gauges():
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in DatabaseGauges().collect()
            for s in family.samples}


def test_checkpoint_age_is_the_newest_checkpoint_of_the_longest_waiting_run_per_status(calls_file):
    waiting, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, "fail_times": 1},
                                    business_key="k")
    executor.advance(waiting.id)
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.WAITING_RETRY and waiting.checkpoint_seq == 1
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Checkpoint.objects.filter(run=waiting, seq=1).update(created_at=an_hour_ago)
    Checkpoint.objects.filter(run=waiting, seq=0).update(created_at=an_hour_ago - timedelta(days=3))  # not the newest
    found = gauges()
    assert 3600 <= found[("checkpoint_age_seconds", (("status", "WAITING_RETRY"),))] < 3660
    assert found[("checkpoint_age_seconds", (("status", "NEEDS_ATTENTION"),))] == 0
    assert found[("checkpoint_age_seconds", (("status", "BLOCKED_VERSION"),))] == 0


@pytest.mark.django_db(transaction=True)
def test_parked_runs_checkpoint_age_is_that_of_the_run_parked_longest(tmp_path):
    """Every waiting status is a series, WAITING too; for parked runs, the one parked longest is found by its index
    (its newest checkpoint's age grows while it sleeps, by design)."""
    from tests.durable.console.parked import parked

    longest = parked("test-sleep", tmp_path, key="long", seconds=86400)
    parked("test-wait-event", tmp_path, key="recent", seconds=0)
    a_day_ago = timezone.now() - timedelta(days=1)
    Run.objects.filter(id=longest.id).update(updated_at=a_day_ago)
    Checkpoint.objects.filter(run=longest).update(created_at=a_day_ago)
    found = gauges()
    assert {labels[0][1] for name, labels in found if name == "checkpoint_age_seconds"} == {
        "WAITING_APPROVAL", "WAITING_RETRY", "WAITING", "NEEDS_ATTENTION", "BLOCKED_VERSION", "PAUSED"}
    assert 86400 <= found[("checkpoint_age_seconds", (("status", "WAITING"),))] < 86460


@pytest.mark.django_db(transaction=True)
def test_a_parked_run_due_and_not_woken_is_overdue_until_the_sweeper_wakes_it(tmp_path):
    from durable.runtime import wakes
    from tests.durable.console.parked import parked

    assert gauges()[("run_wait_overdue_seconds", ())] == 0
    run = parked("test-sleep", tmp_path, seconds=3600)
    parked("test-wait-event", tmp_path, key="no-deadline", seconds=0)  # never due: never overdue
    assert gauges()[("run_wait_overdue_seconds", ())] == 0  # due in an hour
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - timedelta(minutes=5))
    assert 300 <= gauges()[("run_wait_overdue_seconds", ())] < 360
    assert wakes.wake_due() == [run.id]
    assert gauges()[("run_wait_overdue_seconds", ())] == 0


def test_the_checkpoint_ages_and_the_overdue_wait_are_one_query_each(django_assert_num_queries):
    from durable.exposition import checkpoint_ages, wait_overdue

    with django_assert_num_queries(2):
        checkpoint_ages(timezone.now())
        wait_overdue(timezone.now())


def test_checkpoint_age_is_read_with_one_query(django_assert_num_queries):
    from durable.exposition import checkpoint_ages

    with django_assert_num_queries(1):
        checkpoint_ages(timezone.now())


def test_pending_approvals_their_oldest_age_and_soonest_expiry(demo):
    assert gauges()[("approval_pending", ())] == 0 and ("approval_next_expiry_seconds", ()) not in gauges()
    run, request = waiting_claim()
    type(request).objects.filter(id=request.id).update(created_at=timezone.now() - timedelta(hours=30))
    found = gauges()
    assert found[("approval_pending", ())] == 1
    assert 30 * 3600 <= found[("approval_oldest_pending_age_seconds", ())] < 30 * 3600 + 60
    assert 0 < found[("approval_next_expiry_seconds", ())] <= (request.expires_at - timezone.now()).total_seconds() + 1
    assert 0 <= found[("checkpoint_age_seconds", (("status", "WAITING_APPROVAL"),))] < 60  # checkpointed just now
    assert Run.objects.get(id=run.id).status == RunStatus.WAITING_APPROVAL


def test_unknown_operations_open_now(demo):
    from tests.durable.claims import needs_attention

    needs_attention(demo)
    assert gauges()[("side_effect_unknown_operations", ())] == 1


def test_a_worker_only_machine_serves_its_counters_without_a_web_process():
    import threading

    import httpx

    from durable.management.commands.durable_metrics import metrics_server

    metrics.idempotency_key_hit("exporter-check")
    server = metrics_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).text
    finally:
        server.shutdown()
        server.server_close()
    assert 'idempotency_key_hit_total{action="exporter-check"}' in page
    assert "checkpoint_age_seconds" not in page  # database gauges come from the web's /metrics only
