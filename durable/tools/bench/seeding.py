"""What the seeding benchmarks share: Postgres only, and tables made ready as autovacuum would."""
from __future__ import annotations

from django.db import connection


def require_postgres(benchmark: str) -> None:
    if connection.vendor != "postgresql":
        raise RuntimeError(f"the {benchmark} benchmark seeds with Postgres' generate_series; set DATABASE_URL")


def vacuum_analyze(*tables: str) -> None:
    """Statistics, and the visibility map that index-only scans need, as autovacuum soon provides.
    Outside any transaction: VACUUM refuses to run in one."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
