"""Runs parked on timers and events at scale (Postgres): what the sweeper's queries cost beside them.

`durable_bench --parked N` seeds N runs WAITING with one INSERT ... SELECT generate_series, as the console
benchmark seeds its runs (durable/tools/bench/console.py): 60% on a timer due within three days (0.1% of all
overdue, as a beat after a pause finds them), 20% on an event with a deadline within two days, 20% on an event
with none; each with the WAIT journal entry its wait wrote and a searchable field of its own. They were created
1 to 30 days ago, before the overview's last-day window. Then it times the sweeper's queries on them and shows
their plans (EXPLAIN (ANALYZE, BUFFERS)): wake_due's SELECT, which must read what is due through the partial
index run_wake_due, and due_runs, which must not read the parked runs at all. With --keep the runs stay for
`durable_console_bench --reuse`, which then also times the runs list filtered on WAITING and a parked run's page.
"""
from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from durable.tools.bench.seeding import RUN_COLUMNS, require_postgres, vacuum_analyze

PREFIX = "bench-parked-"
SEEDED = f"workflow_name LIKE '{PREFIX}%%'"
# mod(i, 10): 0-5 a timer, 6-7 an event with a deadline, 8-9 an event without; every 1,000th run's timer is overdue.
DUE = """CASE
    WHEN mod(i, 1000) = 0 THEN now() - mod(i, 3600) * interval '1 second'
    WHEN mod(i, 10) < 6 THEN now() + interval '1 minute' + mod(i::bigint * 7919, 259200) * interval '1 second'
    WHEN mod(i, 10) < 8 THEN now() + interval '1 minute' + mod(i::bigint * 7919, 172800) * interval '1 second'
    END"""


def seed(runs: int) -> None:
    """`runs` parked runs over 3 workflows, one every 2.5 seconds back from a day ago."""
    require_postgres("parked runs")
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO durable_run ({RUN_COLUMNS}, next_attempt_at, waiting_for)
            SELECT gen_random_uuid(), '{PREFIX}' || mod(i, 3), 1, 1, '', '', '', 'bench', '[]'::jsonb,
                'PARK-' || i, '', jsonb_build_object('reply_to', 'parked-' || i || '@mail.test'), 'WAITING', 'wait', 1,
                0, 1, created, created, due,
                jsonb_build_object('kind', CASE WHEN mod(i, 10) < 6 THEN 'timer' ELSE 'event' END, 'step', 'wait',
                    'visit', 1, 'until', to_jsonb(due), 'children', '[]'::jsonb, 'call_index', 0,
                    'events', CASE WHEN mod(i, 10) < 6 THEN '[]'::jsonb ELSE '["reply"]'::jsonb END)
            FROM generate_series(1, %s) AS i,
                LATERAL (SELECT now() - interval '1 day' - i * interval '2.5 seconds' AS created, {DUE} AS due) AS w""",
                       [runs])
        cursor.execute(f"""
            INSERT INTO durable_runsearch (run_id, created_at, business_key, field_text, fields)
            SELECT id, created_at, lower(business_key), lower(input->>'reply_to'), input
            FROM durable_run WHERE {SEEDED}""")
        cursor.execute(f"""
            INSERT INTO durable_journalentry (run_id, kind, step, visit, call_index, name, detail, fencing_token,
                created_at)
            SELECT id, 'wait', 'wait', 1, 0, '', waiting_for, 1, created_at FROM durable_run WHERE {SEEDED}""")
    vacuum_analyze("durable_run", "durable_runsearch", "durable_journalentry")


def clear() -> None:
    with connection.cursor() as cursor:
        seeded_runs = f"SELECT id FROM durable_run WHERE {SEEDED}"
        for table in ("durable_journalentry", "durable_runsearch"):
            cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({seeded_runs})")
        cursor.execute(f"DELETE FROM durable_run WHERE {SEEDED}")


def sample_run() -> str | None:
    """A parked run to open in the console, if there are any."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM durable_run WHERE {SEEDED} AND status = 'WAITING' LIMIT 1")
        row = cursor.fetchone()
    return str(row[0]) if row else None


def explain(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return [f"    {row[0]}" for row in cursor.fetchall()]


def timed_ms(call: Any, repeat: int) -> tuple[float, float]:
    """(p50, max) milliseconds of `call()` over `repeat` calls, after one warm-up."""
    call()
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), max(timings)


def selects(call: Any) -> list[str]:
    """The SELECTs `call()` sends, as SQL with their parameters in place."""
    with CaptureQueriesContext(connection) as captured:
        call()
    return [query["sql"] for query in captured.captured_queries if query["sql"].lstrip().startswith("SELECT")]


def time_sweeper(repeat: int = 20) -> list[str]:
    """The sweeper's queries beside the parked runs: times, and plans."""
    from durable.runtime import sweeper, wakes
    from durable.runtime.dispatch import drop_queue
    from durable.tools.bench.sweeper import time_due_runs

    parked, due = _count("status = 'WAITING'"), _count("status = 'WAITING' AND next_attempt_at <= now()")
    # due_runs first: an undone beat leaves its PENDING index entries behind until vacuum, which due_runs would read.
    due_runs_p50, due_runs_max, found = time_due_runs(repeat)
    due_runs_plan = explain(selects(sweeper.due_runs)[0])
    woke: list[int] = []
    # Beats that wake what is due, each undone (its messages go to a queue of this call's own, dropped after),
    # so that every beat finds the same runs due.
    queue = f"durable-bench-parked-{uuid.uuid4().hex[:8]}"
    with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        try:
            wake_select = selects(lambda: _undone(wakes.wake_due))[0]
            select_p50, select_max = timed_ms(lambda: _run(wake_select), repeat)
            wake_plan = explain(wake_select)
            beat_p50, beat_max = timed_ms(lambda: _undone(lambda: woke.append(len(wakes.wake_due()))), 3)
        finally:
            drop_queue(queue)
    vacuum_analyze("durable_run")  # the undone beats' dead rows, as autovacuum soon would
    return [f"  parked runs: {parked:,} of {_count('true'):,} runs, {due:,} of them due now",
            f"  wake_due()'s SELECT alone: p50 {select_p50:.2f} ms, max {select_max:.2f} ms over {repeat}",
            f"  wake_due(), a beat waking {woke[-1]:,} runs (SELECT, UPDATE, a message each, rolled back): "
            f"p50 {beat_p50:.1f} ms, max {beat_max:.1f} ms over 3 beats",
            f"  due_runs(): p50 {due_runs_p50:.2f} ms, max {due_runs_max:.2f} ms over {repeat} beats, {found} run(s) due",
            "  EXPLAIN (ANALYZE, BUFFERS) of wake_due()'s SELECT:", *wake_plan,
            "  EXPLAIN (ANALYZE, BUFFERS) of due_runs()' SELECT:", *due_runs_plan]


def seed_and_time(runs: int, repeat: int = 20, *, keep: bool = False, reuse: bool = False) -> list[str]:
    """Seed `runs` parked runs (none with `reuse`: an earlier `keep` left them), time the sweeper's queries beside
    them, and remove them unless `keep`."""
    started = time.perf_counter()
    if not reuse:
        seed(runs)
    seeded = time.perf_counter() - started
    try:
        return [*([] if reuse else [f"  seeded {runs:,} parked runs in {seeded:.0f} s"]), *time_sweeper(repeat)]
    finally:
        if not keep:
            clear()


def _undone(call: Any) -> None:
    with transaction.atomic():
        call()
        transaction.set_rollback(True)


def _run(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        cursor.fetchall()


def _count(where: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM durable_run WHERE {where}")
        return cursor.fetchone()[0]

