"""What the store's tests share: a connection of its own, outside the process's connection pool."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection


@pytest.fixture
def unpooled() -> Iterator[None]:
    """This thread's connections opened and closed as without a pool (DURABLE_DB_POOL_SIZE=0): closing one ends its
    session, where a pool would hand the same session back."""
    options = connection.settings_dict["OPTIONS"]
    pool = options.pop("pool", None)
    connection.close()
    try:
        yield
    finally:
        connection.close()
        if pool is not None:
            options["pool"] = pool
