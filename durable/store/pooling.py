"""Whether this process's connections come from a pool, and its size: what the store's writer and the fleet's
connection budget both read."""
from __future__ import annotations

from django.db import connection


def pool_size() -> int:
    """The most connections this process opens to the default database: its pool's max_size (0: no pool)."""
    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    if not pool:
        return 0
    return int(pool.get("max_size", 4)) if isinstance(pool, dict) else 4  # psycopg_pool's default size is 4
