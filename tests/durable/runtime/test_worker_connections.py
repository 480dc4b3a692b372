"""Which task threads keep their pooled connection between tasks (durable/runtime/worker.py): only while the pool
still has one for each of the process's own threads (heartbeat, sweeper, timers) beside them."""
from types import SimpleNamespace

import pytest

from durable.runtime import worker


@pytest.mark.parametrize(("pool", "concurrency", "keeps"), [
    ("solo", 1, True),  # one task thread: it keeps its own, the pool has room for the process's threads
    ("threads", 7, True),  # 7 + heartbeat, sweeper and timers = the pool of 10
    ("threads", 10, False),  # the case that starved the heartbeat: every connection kept by a task thread
    ("threads", 500, False),
])
def test_task_threads_keep_connections_only_while_the_processs_own_threads_still_find_one(
        settings, monkeypatch, pool, concurrency, keeps):
    monkeypatch.setattr("durable.fleet.pool_size", lambda: 10)
    monkeypatch.setattr(worker, "_keep_between_tasks", [not keeps])
    pool_cls = "celery.concurrency.thread:TaskPool" if pool == "threads" else "celery.concurrency.solo:TaskPool"
    worker._count_task_threads(SimpleNamespace(pool_cls=pool_cls, concurrency=concurrency))
    assert worker._keep_between_tasks == [keeps]
