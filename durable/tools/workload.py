"""Synthetic workloads (the benchmark, the drill, the scale-out harness): whose runs they are, waiting for them,
and removing them after."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from durable.models import Run, SideEffect
from durable.scope import TOOL_ACCOUNT_PREFIX


def wait_for_runs(run_ids: Sequence[UUID], *, until: Collection[str], timeout: float,
                  tick: Callable[[], None] | None = None) -> int:
    """Poll until every run's status is in `until`, or the timeout; returns how many are not."""
    deadline = time.monotonic() + timeout
    waiting = Run.objects.filter(id__in=run_ids).exclude(status__in=list(until))
    while waiting.exists() and time.monotonic() < deadline:
        if tick is not None:
            tick()
        time.sleep(0.2)
    return waiting.count()


def delete_runs(run_ids: Sequence[UUID]) -> None:
    """Delete runs with their ledger rows; checkpoints and journal entries cascade."""
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start:start + 500]
        with transaction.atomic():
            SideEffect.objects.filter(run_id__in=chunk).delete()  # PROTECTs its run: goes first
            Run.objects.filter(id__in=chunk).delete()


def tool_account(tool: str) -> Any:
    """An account of this invocation's own, to start the tool's runs as: its workers' sweeper touches only the
    runs this account created, and production's sweeper none of them (durable/scope.py). Of the project's own
    user model (a host's `AUTH_USER_MODEL`)."""
    account = get_user_model()(username=f"{TOOL_ACCOUNT_PREFIX}{tool}-{uuid.uuid4().hex[:8]}")
    if hasattr(account, "first_name"):
        account.first_name = f"{tool} (tool account, one invocation)"
    account.set_unusable_password()
    account.save()
    return account


def scope_env(account: AbstractBaseUser) -> dict[str, str]:
    """The environment that scopes a tool's worker processes to the runs `account` created."""
    return {"DURABLE_SCOPE_CREATED_BY": str(account.pk)}


def retire(account: AbstractBaseUser) -> None:
    """The tool is done: its account can no longer sign in or call the API (it stays, as its runs' creator)."""
    get_user_model().objects.filter(pk=account.pk).update(is_active=False)
