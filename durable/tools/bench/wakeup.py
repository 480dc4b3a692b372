"""Wake-up latency with a real worker and broker: how long a run waits to be picked up again.

One probe run goes through three wake-ups, one at a time on an idle worker:
- started: `POST /api/runs/` sent -> its first step starts;
- approved: an approval decided (approvals.services.decide) -> the next step starts;
- retried: a retryable error's due time -> the step's second attempt starts.
Each step notes the wall clock as it starts (same machine, same clock) in the run's state.
Workers started by durable_bench import this module, which registers the probe's workflow.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from durable.context import Context
from durable.engine.approvals import Revalidation
from durable.engine.errors import RetryableError
from durable.engine.retry import RetryPolicy
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

WORKFLOW = "bench-wakeup"
RETRY_AFTER = 0.05  # seconds: the retry's due time, short so that probes stay quick
KINDS = ("started", "approved", "retried")


State = TypeVar("State", bound=BaseModel)


class Probe(BaseModel):
    started_at: float = 0.0
    approved_at: float = 0.0
    failed_at: float = 0.0
    retried_at: float = 0.0


def revalidate_probe(snapshot: dict[str, Any]) -> Revalidation:
    return Revalidation(current=snapshot)


def first(ctx: Context, state: Probe) -> Probe:
    state.started_at = time.time()
    return state


def ask(ctx: Context, state: Probe) -> Probe:
    ctx.request_approval("bench", snapshot={"probe": True}, approve={"probe": True}, revalidate=revalidate_probe,
                         expires_in=timedelta(hours=1))
    return state


def after_approval(ctx: Context, state: Probe) -> Probe:
    state.approved_at = time.time()
    return state


def flaky(ctx: Context, state: Probe) -> Probe:
    if ctx.attempt == 0:
        raise RetryableError("the probe fails once", retry_after=RETRY_AFTER)
    state.retried_at = time.time()
    return state


def wakeup_workflow() -> Workflow:
    def build() -> Workflow:
        # No tools, prompts or model: the releases say so (durable.W010).
        workflow = Workflow(name=WORKFLOW, version=1, state=Probe, input=Probe, tool_catalog_version="none",
                            prompt_release="none", model_policy_version="none")
        workflow.step(first)
        workflow.step(ask)
        workflow.step(after_approval)
        workflow.step(flaky, retry=RetryPolicy(max_attempts=2, initial_interval=0.0, max_interval=1.0, jitter=0.0))
        return workflow

    return registered_once(WORKFLOW, build)


@dataclass
class Wakeups:
    """Milliseconds each probe waited, by kind."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})

    def add(self, other: Wakeups) -> None:
        for kind in KINDS:
            self.ms[kind] += other.ms[kind]

    def lines(self) -> list[str]:
        labels = {"started": "POST /api/runs/ -> first step starts", "approved": "approval decided -> next step starts",
                  "retried": f"retry due ({RETRY_AFTER * 1000:.0f} ms after the error) -> retry starts"}
        return latency_lines([(labels[kind], self.ms[kind]) for kind in KINDS], counted="probes")


def latency_lines(rows: list[tuple[str, list[float]]], counted: str = "probes", worst: bool = False) -> list[str]:
    """A table of wake-up latencies in milliseconds: a row per kind, its count, p50 and p99 (and the max)."""
    from durable.tools.bench.compare import percentile

    width = max(48, *(len(label) for label, _ in rows))
    lines = [f"  {'wake-up':<{width}} {counted:>6} {'p50 ms':>8} {'p99 ms':>8}" + (f" {'max ms':>8}" if worst else "")]
    for label, values in rows:
        lines.append(f"  {label:<{width}} {len(values):>6} {percentile(values, 50):>8.1f} "
                     f"{percentile(values, 99):>8.1f}" + (f" {max(values, default=0.0):>8.1f}" if worst else ""))
    return lines


def probe(count: int, starter: Any, timeout: float = 30.0) -> Wakeups:
    """Send `count` probe runs one after another through the API, the approvals service and a retry,
    with the benchmark's workers idle and scoped to `starter`'s runs. The probe runs and both accounts
    stay: an approval is audited, and the audit trail is append-only (it PROTECTs its run and actor)."""
    from django.test import override_settings
    from rest_framework.test import APIClient

    from durable.tools.workload import retire, tool_account

    approver = tool_account("bench-approver")  # a second person: nobody approves their own run
    _join(starter, "operator")
    _join(approver, "approver")
    client = APIClient()
    client.force_authenticate(starter)
    found = Wakeups()
    try:
        with override_settings(ALLOWED_HOSTS=["testserver"], SECURE_SSL_REDIRECT=False):
            for i in range(count):
                _probe_once(client, approver, f"wakeup-{starter.pk}-{i}", found, timeout)
    finally:
        retire(approver)
    return found


def _probe_once(client: Any, approver: Any, business_key: str, found: Wakeups, timeout: float) -> None:
    from approvals.models import ApprovalRequest
    from approvals.services import decide
    from durable.engine.states import RunStatus
    from durable.models import JournalEntry

    sent = time.time()
    response = client.post("/api/runs/", {"workflow": WORKFLOW, "input": {}, "business_key": business_key},
                           format="json", secure=True)
    if response.status_code not in (200, 201):
        raise RuntimeError(f"POST /api/runs/ answered {response.status_code}: {response.content[:200]!r}")
    run_id = response.json()["id"]
    _wait(run_id, RunStatus.WAITING_APPROVAL, timeout)
    request = ApprovalRequest.objects.get(run_id=run_id, status="PENDING")
    decided = time.time()
    decide(request_id=request.id, user=approver, verdict="approve", snapshot_hash=request.snapshot_hash, source="api")
    state = _wait(run_id, RunStatus.SUCCEEDED, timeout)
    due = (JournalEntry.objects.get(run_id=run_id, kind=JournalEntry.Kind.RETRY_SCHEDULED).detail or {})["due"]
    found.ms["started"].append((state.started_at - sent) * 1000)
    found.ms["approved"].append((state.approved_at - decided) * 1000)
    found.ms["retried"].append((state.retried_at - datetime.fromisoformat(due).timestamp()) * 1000)


def _wait(run_id: Any, status: str, timeout: float) -> Probe:
    return wait_for_state(run_id, status, timeout, Probe)


def wait_for_state(run_id: Any, status: str, timeout: float, model: type[State]) -> State:
    """Poll until the run has `status` (every 2 ms: the steps note their own start, so polling adds nothing to
    what is measured); its newest checkpoint's state."""
    from durable.models import Run
    from durable.store.checkpoints import state_at

    deadline = time.monotonic() + timeout
    while Run.objects.filter(id=run_id).values_list("status", flat=True).first() != status:
        if time.monotonic() > deadline:
            raise RuntimeError(f"probe run {run_id} did not reach {status} within {timeout:.0f}s")
        time.sleep(0.002)
    seq = Run.objects.filter(id=run_id).values_list("checkpoint_seq", flat=True).get()
    return model.model_validate(state_at(run_id, seq))


def _join(user: Any, role: str) -> None:
    from django.contrib.auth.models import Group

    from durable.roles import ensure_roles

    ensure_roles()
    user.groups.add(Group.objects.get(name=role))


wakeup_workflow()
