"""What the seeding benchmarks share: Postgres only, and tables made ready as autovacuum would."""
from __future__ import annotations

from django.db import connection

# The columns of durable_run a seeded run must have (NOT NULL, no database default), in the order the seeds'
# SELECTs give them: each seed adds its own after these (finished_at, next_attempt_at, ...).
RUN_COLUMNS = """id, workflow_name, workflow_version, checkpoint_schema_version, tool_catalog_version, prompt_release,
    model_policy_version, topology_fingerprint, topology, business_key, start_request_hash, input, status,
    current_step, checkpoint_seq, attempt, fencing_token, created_at, updated_at"""


def require_postgres(benchmark: str) -> None:
    if connection.vendor != "postgresql":
        raise RuntimeError(f"the {benchmark} benchmark seeds with Postgres' generate_series; set DATABASE_URL")


def vacuum_analyze(*tables: str) -> None:
    """Statistics, and the visibility map that index-only scans need, as autovacuum soon provides.
    Outside any transaction: VACUUM refuses to run in one."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
