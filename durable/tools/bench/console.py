"""Console page speed on a big database: seed runs, approvals and operations, time the pages in-process.

Seeding is one INSERT ... SELECT generate_series per table (Postgres), so a million runs
take seconds, not an hour of ORM saves. Seeded rows belong to workflows named
`bench-console-*` and are removed by `clear()`. Pages are requested through Django's
test client by a logged-in viewer, as a browser reaching a production install would:
on a host that ALLOWED_HOSTS allows, over HTTPS (so SECURE_SSL_REDIRECT does not answer
instead). The time measured is the server's (URL routing, middleware, views, queries,
templates), without a network or a browser.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import Client

from durable.engine.approvals import Revalidation
from durable.tools.bench.seeding import RUN_COLUMNS, require_postgres, vacuum_analyze

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
ENDED = "('SUCCEEDED', 'FAILED', 'CANCELLED')"
SEEDED = f"workflow_name LIKE '{PREFIX}%%'"


def customer_email(i: int) -> str:
    """The seeded run i's customer, a searchable field: as seed() writes it."""
    return f"customer-{i}@example.com"


def revalidate_unchanged(snapshot: dict[str, Any]) -> Revalidation:
    """The seeded requests' revalidation: the facts as they were, read from nowhere, so the approval page's
    time is the console's own and not a downstream's."""
    return Revalidation(current=dict(snapshot))


def seed(runs: int, approvals: int) -> None:
    """`runs` runs over 5 workflows x 3 versions, one every 6 seconds back from now (14,400 a day), each with
    a customer email as a searchable field; `approvals` of the WAITING_APPROVAL ones (1 in 100) get a pending
    request, and those of the last day that ended get a decided one; every 50th run has a side effect
    (UNKNOWN for the runs in NEEDS_ATTENTION) and every 500th a prevented duplicate."""
    require_postgres("console")
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO durable_run ({RUN_COLUMNS}, finished_at)
            SELECT gen_random_uuid(), '{PREFIX}' || mod(i, 5), 1 + mod(i, 3), 1, '', '', '', 'bench', '[]'::jsonb,
                'ORD-' || i, '', jsonb_build_object('customer_email', 'customer-' || i || '@example.com'),
                s.status, 'step', 0, 0, 0, now() - (i * interval '6 seconds'), now() - (i * interval '6 seconds'),
                CASE WHEN s.status IN {ENDED} THEN now() - (i * interval '6 seconds') + interval '3 seconds' END
            FROM generate_series(1, %s) AS i, LATERAL (SELECT {STATUS_BY_BUCKET} AS status) AS s""", [runs])
        cursor.execute(f"""
            INSERT INTO durable_runsearch (run_id, created_at, business_key, field_text, fields)
            SELECT id, created_at, lower(business_key), lower(input->>'customer_email'), input
            FROM durable_run WHERE {SEEDED}""")
        _seed_approvals(cursor, approvals)
        _seed_operations(cursor)
    vacuum_analyze("durable_run", "durable_runsearch", "approvals_approvalrequest", "durable_sideeffect",
                   "durable_journalentry")  # the status counts use index-only scans


def _seed_approvals(cursor: Any, approvals: int) -> None:
    request = f"""
        INSERT INTO approvals_approvalrequest (id, run_id, step, visit, position, kind, ask, workflow_name,
            workflow_version, business_key, snapshot, snapshot_hash, approval_object, object_hash, revalidate, on_invalid,
            on_expiry, approvers_required, approvals_count, status, expires_at, created_at, decided_at, reason)
        SELECT gen_random_uuid(), r.id, 'approval', r.checkpoint_seq, 1, 'refund', 1, r.workflow_name,
            r.workflow_version,
            r.business_key, jsonb_build_object('order_id', r.business_key, 'amount', '120.00'), md5(r.business_key),
            jsonb_build_object('action', 'refund', 'target', r.business_key, 'amount', '120.00', 'currency', 'EUR'),
            md5(r.id::text), '{__name__}:revalidate_unchanged', 'ask_again', 'fail', 1, %s, %s,
            r.created_at + interval '3 days', r.created_at, {{decided_at}}, ''
        FROM durable_run r WHERE r.{SEEDED} AND {{which}}"""
    cursor.execute(request.format(decided_at="NULL", which="r.status = 'WAITING_APPROVAL' "
                                  "ORDER BY r.created_at DESC LIMIT %s"), [0, "PENDING", approvals])
    # One decided request for every 20th run that ended in the last day, answered 90 s after it was asked.
    cursor.execute(request.format(decided_at="r.created_at + interval '90 seconds'",
                                  which=f"r.status IN {ENDED} AND r.created_at > now() - interval '1 day' "
                                        "AND mod(hashtext(r.business_key), 20) = 0"), [1, "APPROVED"])


def _seed_operations(cursor: Any) -> None:
    cursor.execute(f"""
        INSERT INTO durable_sideeffect (operation_id, run_id, step, action_name, downstream, business_key,
            request_hash, payload, status, external_ref, result_json, response_hash, attempts, duplicates_prevented,
            last_error, resolution_evidence, created_at, updated_at)
        SELECT md5(r.id::text), r.id, 'refund', 'refund', 'payments', r.business_key, md5(r.business_key),
            jsonb_build_object('amount', '120.00'),
            CASE WHEN r.status = 'NEEDS_ATTENTION' THEN 'UNKNOWN' ELSE 'SUCCEEDED' END,
            'ref-' || r.business_key, '{{}}'::jsonb, '', 1, 0, NULL, '', r.created_at, r.created_at
        FROM durable_run r
        WHERE r.{SEEDED} AND (r.status = 'NEEDS_ATTENTION' OR mod(hashtext(r.business_key), 50) = 0)""")
    cursor.execute(f"""
        INSERT INTO durable_journalentry (run_id, kind, step, name, detail, fencing_token, created_at)
        SELECT s.run_id, 'duplicate_prevented', s.step, s.action_name,
            jsonb_build_object('operation_id', s.operation_id), 0, s.created_at + interval '1 second'
        FROM durable_sideeffect s JOIN durable_run r ON r.id = s.run_id
        WHERE r.{SEEDED} AND s.status = 'SUCCEEDED' AND mod(hashtext(s.operation_id), 10) = 0""")


def clear() -> None:
    with connection.cursor() as cursor:
        seeded_runs = f"SELECT id FROM durable_run WHERE {SEEDED}"
        cursor.execute(f"DELETE FROM approvals_approvalrequest WHERE {SEEDED}")
        for table in ("durable_journalentry", "durable_sideeffect", "durable_runsearch"):
            cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({seeded_runs})")
        cursor.execute(f"DELETE FROM durable_run WHERE {SEEDED}")


def samples() -> dict[str, str]:
    """Seeded objects the pages are aimed at: a run with a pending request, an operation, a customer; and a
    number k whose business keys ORD-k, ORD-k0..ORD-k9 (and customers) are 11 of the seeded runs."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM durable_run WHERE {SEEDED}")
        (seeded,) = cursor.fetchone()
        cursor.execute(f"""SELECT a.run_id, a.id FROM approvals_approvalrequest a WHERE a.{SEEDED}
                           AND a.status = 'PENDING' ORDER BY a.created_at DESC LIMIT 1""")
        run_id, approval_id = cursor.fetchone()
        cursor.execute(f"""SELECT s.operation_id FROM durable_sideeffect s JOIN durable_run r ON r.id = s.run_id
                           WHERE r.{SEEDED} AND s.status = 'UNKNOWN' ORDER BY s.created_at DESC LIMIT 1""")
        (operation_id,) = cursor.fetchone()
    return {"run": str(run_id), "approval": str(approval_id), "operation": operation_id,
            "eleven": str(seeded // 80), "customer": customer_email(seeded // 2)}


def allowed_host() -> str:
    """A host name the install's ALLOWED_HOSTS accepts, so the pages answer as they do for a browser."""
    for host in settings.ALLOWED_HOSTS:
        if host == "*":
            return "localhost"
        if host.lstrip("."):
            return host.lstrip(".")  # ".example.com" allows example.com itself
    return "localhost"  # an empty list allows localhost only under DEBUG, as Django validates it


@dataclass(frozen=True)
class PageTiming:
    name: str
    url: str
    rows: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    status: int
    changed: int = 0  # polls carrying the version answered 200, not 304: the state changed in between


def time_page(client: Client, name: str, url: str, repeat: int, count: str, *, status: int = 200,
              revalidate: bool = False, **headers: Any) -> PageTiming:
    """Request `url` `repeat` times (after one warm-up) over HTTPS; `count` is a marker counted in the page as its
    rows; `status` the answer expected (302: a search that opens the one thing it found).

    `revalidate`: each timed request carries the version the region shows, read just before (untimed), as
    live.js sends it; its 304 is expected, and a 200 is counted as `changed` (a benchmark beside it, say, finished
    runs in between)."""
    first = client.get(url, secure=True, **headers)
    if first.status_code != (200 if revalidate else status):
        raise RuntimeError(f"{url} answered {first.status_code}, not {status}")
    timings, changed = [], 0
    for _ in range(repeat):
        if revalidate:
            headers["HTTP_IF_NONE_MATCH"] = client.get(url, secure=True, **headers)["ETag"]
        started = time.perf_counter()
        response = client.get(url, secure=True, **headers)
        timings.append((time.perf_counter() - started) * 1000)
        if revalidate and response.status_code == 200:
            changed += 1
        else:
            assert response.status_code == status, (url, response.status_code)
    timings.sort()
    p95 = timings[max(0, round(0.95 * len(timings)) - 1)]
    return PageTiming(name, url, first.content.decode().count(count) if count and not revalidate else 0,
                      statistics.median(timings), p95, timings[-1], status, changed)


def explain(sql_of: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql_of)
        return "\n".join(row[0] for row in cursor.fetchall())
