"""Django's per-task connection health check, skipped for a connection proven moments ago
(durable/store/health.py), on real Postgres: the check's round trip is a busy worker's cost per run."""
from __future__ import annotations

from unittest.mock import patch

import pytest
from django.db import DatabaseError, close_old_connections, connection, connections

from durable import services
from durable.models import Checkpoint, Run
from durable.store import health, store

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgres_with_health_checks(settings, unpooled):
    """A worker without a connection pool (DURABLE_DB_POOL_SIZE=0): from a pool, Django leaves the checks to it."""
    if connection.vendor != "postgresql":
        pytest.skip("only the Postgres store sends its statements on a kept cursor")
    given = dict(connection.settings_dict)
    connection.settings_dict["CONN_HEALTH_CHECKS"] = True
    connection.settings_dict["CONN_MAX_AGE"] = 600  # kept between tasks, as in a worker
    yield
    connection.close()
    connection.settings_dict.update(CONN_HEALTH_CHECKS=given["CONN_HEALTH_CHECKS"], CONN_MAX_AGE=given["CONN_MAX_AGE"])


def pending_run() -> Run:
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="health")
    return run


def next_task() -> None:
    """What the worker does between two tasks (durable.runtime.worker): Django's per-request connection care."""
    close_old_connections()


def checks_made_by(claim) -> int:
    with patch.object(type(connections["default"]), "is_usable", autospec=True, side_effect=lambda db: True) as is_usable:
        claim()
    return is_usable.call_count


def test_a_connection_a_statement_came_back_on_moments_ago_is_not_checked_again():
    first, second = pending_run(), pending_run()
    store().claim(first.id, "w1", 60)
    next_task()

    assert checks_made_by(lambda: store().claim(second.id, "w1", 60)) == 0
    assert connection.health_check_done  # nor by Django's own cursor later in the task


def test_a_connection_idle_for_longer_is_checked_before_the_tasks_first_statement():
    first, second = pending_run(), pending_run()
    store().claim(first.id, "w1", 60)
    next_task()
    proven_on, at = connection._durable_proven
    connection._durable_proven = (proven_on, at - health.PROVEN_SECONDS)

    assert checks_made_by(lambda: store().claim(second.id, "w1", 60)) == 1


def test_a_connection_that_died_inside_the_window_fails_one_task_writes_nothing_and_is_replaced():
    first, second = pending_run(), pending_run()
    store().claim(first.id, "w1", 60)
    pid = connection.connection.info.backend_pid
    next_task()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:  # the server drops the worker's session
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()

    with pytest.raises(DatabaseError):
        store().claim(second.id, "w1", 60)
    next_task()  # Django checks a connection that raised, finds it dead and closes it

    second.refresh_from_db()
    assert second.lease_owner is None and second.fencing_token == 0  # the claim wrote nothing
    assert store().claim(second.id, "w1", 60) is not None  # on a new connection
    assert Checkpoint.objects.filter(run=second).count() == 1
