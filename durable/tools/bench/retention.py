"""Retention on a big database: seed finished runs with their history, then time `prune`.

Seeding is INSERT ... SELECT generate_series (Postgres): N SUCCEEDED runs finished 60 days
ago, each with a start checkpoint, two step checkpoints and three journal entries.
"""
from __future__ import annotations

from django.db import connection

from durable.tools.bench.seeding import RUN_COLUMNS, require_postgres, vacuum_analyze

PREFIX = "bench-retention"


def seed(runs: int) -> None:
    require_postgres("retention")
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO durable_run ({RUN_COLUMNS}, finished_at)
            SELECT gen_random_uuid(), '{PREFIX}', 1, 1, '', '', '', 'bench', '[]'::jsonb, 'R-' || i, '',
                '{{}}'::jsonb, 'SUCCEEDED', '', 2, 0, 1, now() - interval '61 days', now() - interval '60 days',
                now() - interval '60 days'
            FROM generate_series(1, %s) AS i""", [runs])
        cursor.execute(f"""
            INSERT INTO durable_checkpoint (run_id, seq, step, next_step, state, state_schema_version, created_at)
            SELECT r.id, s.seq, CASE s.seq WHEN 0 THEN '' ELSE 'step' || s.seq END,
                CASE s.seq WHEN 2 THEN '' ELSE 'step' || (s.seq + 1) END,
                '{{"order": {{"amount": "120.00"}}, "plan": "refund"}}'::jsonb, 1, r.created_at
            FROM durable_run r CROSS JOIN generate_series(0, 2) AS s(seq) WHERE r.workflow_name = '{PREFIX}'""")
        cursor.execute(f"""
            INSERT INTO durable_journalentry (run_id, kind, step, call_index, name, result, fencing_token, created_at)
            SELECT r.id, 'activity', 'step' || c.n, 0, 'llm.plan', '{{"intent": "refund"}}'::jsonb, 1, r.created_at
            FROM durable_run r CROSS JOIN generate_series(1, 3) AS c(n) WHERE r.workflow_name = '{PREFIX}'""")
    vacuum_analyze("durable_run", "durable_checkpoint", "durable_journalentry")


def clear() -> None:
    with connection.cursor() as cursor:
        for table in ("durable_checkpoint", "durable_journalentry"):
            cursor.execute(f"DELETE FROM {table} WHERE run_id IN "
                           f"(SELECT id FROM durable_run WHERE workflow_name = '{PREFIX}')")
        cursor.execute(f"DELETE FROM durable_run WHERE workflow_name = '{PREFIX}'")
