"""Console page speed on a big database: seed runs and pending approvals, time the pages in-process.

Seeding is one INSERT ... SELECT generate_series per table (Postgres), so a million runs
take seconds, not an hour of ORM saves. Seeded rows belong to workflows named
`bench-console-*` and are removed by `clear()`. Pages are requested through Django's
test client by a logged-in viewer: the time measured is the server's (URL routing,
views, queries, templates), without a network or a browser.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from django.db import connection
from django.test import Client

from durable.tools.bench.seeding import require_postgres, vacuum_analyze

PREFIX = "bench-console-"
STATUS_BY_BUCKET = """CASE
    WHEN mod(i, 100) = 0 THEN 'WAITING_APPROVAL'
    WHEN mod(i, 100) < 4 THEN 'FAILED'
    WHEN mod(i, 100) < 5 THEN 'WAITING_RETRY'
    WHEN mod(i, 100) < 6 THEN 'RUNNING'
    WHEN mod(i, 1000) = 7 THEN 'NEEDS_ATTENTION'
    WHEN mod(i, 1000) = 8 THEN 'BLOCKED_VERSION'
    WHEN mod(i, 100) < 8 THEN 'CANCELLED'
    ELSE 'SUCCEEDED' END"""


def seed(runs: int, approvals: int) -> None:
    """`runs` runs over 5 workflows x 3 versions and ~7 days per 100,000; `approvals` of the
    WAITING_APPROVAL ones (1 in 100) get a pending request."""
    require_postgres("console")
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO durable_run (id, workflow_name, workflow_version, checkpoint_schema_version,
                tool_catalog_version, prompt_release, model_policy_version, topology_fingerprint, topology,
                business_key, start_request_hash, input, status, current_step, checkpoint_seq, attempt,
                fencing_token, created_at, updated_at)
            SELECT gen_random_uuid(), '{PREFIX}' || mod(i, 5), 1 + mod(i, 3), 1, '', '', '', 'bench', '[]'::jsonb,
                'ORD-' || i, '', '{{}}'::jsonb, {STATUS_BY_BUCKET}, 'step', 0, 0, 0,
                now() - (i * interval '6 seconds'), now() - (i * interval '6 seconds')
            FROM generate_series(1, %s) AS i""", [runs])
        cursor.execute(f"""
            INSERT INTO approvals_approvalrequest (id, run_id, step, kind, ask, workflow_name, workflow_version,
                business_key, snapshot, snapshot_hash, approval_object, object_hash, revalidate, on_invalid,
                on_expiry, approvers_required, approvals_count, status, expires_at, created_at, reason)
            SELECT gen_random_uuid(), r.id, 'approval', 'refund', 1, r.workflow_name, r.workflow_version,
                r.business_key, jsonb_build_object('order_id', r.business_key, 'amount', '120.00'), md5(r.business_key),
                jsonb_build_object('action', 'refund', 'target', r.business_key, 'amount', '120.00',
                                   'currency', 'EUR'),
                md5(r.id::text), 'durable.tools.demo.refund_checks:revalidate_refund', 'ask_again', 'fail', 1, 0,
                'PENDING', r.created_at + interval '3 days', r.created_at, ''
            FROM durable_run r WHERE r.workflow_name LIKE '{PREFIX}%%' AND r.status = 'WAITING_APPROVAL'
            ORDER BY r.created_at DESC LIMIT %s""", [approvals])
    vacuum_analyze("durable_run", "approvals_approvalrequest")  # the status counts use index-only scans


def clear() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM approvals_approvalrequest WHERE workflow_name LIKE '{PREFIX}%%'")
        cursor.execute(f"DELETE FROM durable_run WHERE workflow_name LIKE '{PREFIX}%%'")


@dataclass(frozen=True)
class PageTiming:
    name: str
    url: str
    rows: int
    p50_ms: float
    p95_ms: float
    max_ms: float


def time_page(client: Client, name: str, url: str, repeat: int, count: str) -> PageTiming:
    """Request `url` `repeat` times (after one warm-up); `count` is a marker counted in the page as its rows."""
    first = client.get(url)
    if first.status_code != 200:
        raise RuntimeError(f"{url} answered {first.status_code}")
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    timings.sort()
    p95 = timings[max(0, round(0.95 * len(timings)) - 1)]
    return PageTiming(name, url, first.content.decode().count(count), statistics.median(timings), p95, timings[-1])


def explain(sql_of: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql_of)
        return "\n".join(row[0] for row in cursor.fetchall())
