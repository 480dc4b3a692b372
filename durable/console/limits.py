"""The Limits page: each named limit (docs/operations.md, "Limits"), its declaration and, per key, what it holds
now: calls in flight against its concurrency, starts and tokens in its window, runs waiting, its pause."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from durable.conf import durable_settings
from durable.console.requests import ConsoleRequest
from durable.engine.call_limits import LimitError, LimitSpec
from durable.permissions import permission_required
from durable.runtime.limits import declared
from durable.store.limits import LimitRow, use_by_key, used_since

VIEW = "durable.view_run"


@dataclass(frozen=True)
class KeyUse:
    key: str
    in_use: int
    waiting: int
    starts: int  # in the rate's period
    tokens: int  # in the tokens' period


@dataclass(frozen=True)
class LimitUse:
    name: str
    spec: LimitSpec | None  # None: no longer declared, yet rows remain (runs still wait on it)
    paused_until: datetime | None
    keys: tuple[KeyUse, ...]


def limits_now() -> tuple[list[LimitUse], str]:
    """Every limit declared or still held, with its keys' use; and what is wrong with DURABLE_LIMITS, if anything."""
    problem = ""
    try:
        specs = declared()
    except LimitError as exc:
        specs, problem = {}, str(exc)
    rows: dict[str, list[LimitRow]] = {name: [] for name in specs}
    for row in use_by_key(float(durable_settings.DURABLE_PENDING_GRACE_SECONDS)):
        rows.setdefault(row.limit, []).append(row)
    now = timezone.now()
    found = []
    for name in sorted(rows):
        spec = specs.get(name)
        keyed = rows[name] or [LimitRow(name, "", 0, 0, None)]
        paused = max((row.paused_until for row in keyed if row.paused_until), default=None)
        found.append(LimitUse(name, spec, paused if paused and paused > now else None,
                              tuple(_key_use(spec, row, now) for row in keyed)))
    return found, problem


def _key_use(spec: LimitSpec | None, row: LimitRow, now: datetime) -> KeyUse:
    starts = tokens = 0
    if spec is not None and spec.rate is not None:
        starts = used_since(row.limit, row.key, now - timedelta(seconds=spec.rate.seconds))[0]
    if spec is not None and spec.tokens is not None:
        tokens = used_since(row.limit, row.key, now - timedelta(seconds=spec.tokens.seconds))[1]
    return KeyUse(row.key, row.in_use, row.waiting, starts, tokens)


@login_required
@permission_required(VIEW)
@require_safe
def limits(request: ConsoleRequest) -> HttpResponse:
    found, problem = limits_now()
    return render(request, "durable/limits.html", {"limits": found, "problem": problem})
