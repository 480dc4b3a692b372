"""What the console's overview and runs list read: counts, one page of runs, a run found by id."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from durable.conf import durable_settings
from approvals.selectors import pending_count, stuck_count
from durable import metrics
from durable.engine.ids import OPERATION_ID_PATTERN
from durable.engine.ledger import OperationStatus
from durable.engine.states import TERMINAL, RunStatus
from durable.models import Run, SideEffect

OPERATION_ID = re.compile(OPERATION_ID_PATTERN)
BLOCKED_SHOWN = 5
FAILURES_SHOWN = 10


FINISHED_WINDOW = timedelta(hours=24)
LISTED = ("id", "workflow_name", "workflow_version", "business_key", "status", "current_step", "created_at")
IN_FLIGHT = [status for status in RunStatus if status not in TERMINAL]


NEAR_EXPIRY = timedelta(hours=1)  # as the DurableApprovalNearExpiry alert (deploy/prometheus/durable-alerts.yml)


@dataclass(frozen=True)
class Alerting:
    """What the Prometheus alerts watch, as the console shows it.

    The counters are the ones /metrics serves, summed over this machine's processes since
    their directory was last cleared; stuck approvals are read from the database now.
    """

    unknown_operations: int  # operations marked UNKNOWN
    retries_exhausted: int
    version_mismatches: int  # runs the replay contract blocked
    stuck_approvals: int  # pending longer than DURABLE_STUCK_APPROVAL_HOURS, or expiring within NEAR_EXPIRY


COUNTED = {"unknown_operations": "side_effect_unknown_total", "retries_exhausted": "retry_exhausted_total",
           "version_mismatches": "workflow_version_mismatch_total"}


def alerting() -> Alerting:
    counted = metrics.totals(COUNTED.values())
    now = timezone.now()
    stuck = stuck_count(older_than=now - timedelta(hours=durable_settings.DURABLE_STUCK_APPROVAL_HOURS),
                        expiring_before=now + NEAR_EXPIRY)
    return Alerting(**{field: int(counted[sample]) for field, sample in COUNTED.items()}, stuck_approvals=stuck)


@dataclass(frozen=True)
class Overview:
    in_flight: list[tuple[str, int]]  # every unfinished status, in the state machine's order, zeros included
    finished_recently: list[tuple[str, int]]  # runs that ended within FINISHED_WINDOW, by how
    pending_approvals: int
    unknown_operations: int
    blocked: list[Run]  # the newest runs blocked on their version
    failures: list[Run]  # the newest failed runs
    alerting: Alerting

    @property
    def blocked_total(self) -> int:
        return dict(self.in_flight)[RunStatus.BLOCKED_VERSION]


def overview() -> Overview:
    """What an operator checks first: runs in flight by status, how runs ended lately, what waits for a human.

    Finished runs are counted over a recent window only: counting a million finished runs
    on every refresh would cost more than the page is worth (durable_console_bench).
    """
    counts = _by_status(Run.objects.filter(status__in=IN_FLIGHT))
    recent = _by_status(Run.objects.filter(status__in=TERMINAL, updated_at__gte=timezone.now() - FINISHED_WINDOW))
    return Overview(
        in_flight=[(status.value, counts.get(status, 0)) for status in IN_FLIGHT],
        finished_recently=[(status.value, recent.get(status, 0)) for status in RunStatus if status in TERMINAL],
        pending_approvals=pending_count(),
        unknown_operations=SideEffect.objects.filter(status=OperationStatus.UNKNOWN).count(),
        blocked=_newest(RunStatus.BLOCKED_VERSION, BLOCKED_SHOWN) if counts.get(RunStatus.BLOCKED_VERSION) else [],
        failures=_newest(RunStatus.FAILED, FAILURES_SHOWN),
        alerting=alerting(),
    )


def _by_status(runs: QuerySet[Run]) -> dict[str, int]:
    # COUNT(*), not COUNT(id): the status index alone answers it (an index-only scan, no table reads).
    return dict(runs.order_by().values_list("status").annotate(n=Count("*")))


def _newest(status: RunStatus, size: int) -> list[Run]:
    # Newest by when the run last changed, i.e. when it was blocked or failed, not when it started.
    runs = Run.objects.filter(status=status).order_by("-updated_at", "-id")
    return list(runs.only("id", "workflow_name", "workflow_version", "business_key", "current_step", "error",
                          "updated_at")[:size])


def runs_page(queryset: QuerySet[Run], after: tuple[datetime, UUID] | None, size: int) -> list[Run]:
    """Up to `size` + 1 runs after the page marker, newest first (the run_created index's order).

    The extra run only tells the caller there is another page.
    """
    listed = runs_after(queryset, after).only(*LISTED)  # not the input, state or error JSON
    return list(listed[:size + 1])


def runs_after(queryset: QuerySet[Run], after: tuple[datetime, UUID] | None) -> QuerySet[Run]:
    """The runs after the page marker, newest first (the run_created index's order)."""
    if after is not None:
        created_at, run_id = after
        queryset = queryset.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=run_id))
    return queryset.order_by("-created_at", "-id")


def find_run(search: str) -> UUID | None:
    """The run a search names: by an operation id (32 hex, the ledger's key) or by the run's own id."""
    search = search.strip().lower()
    if OPERATION_ID.fullmatch(search):
        run_id = SideEffect.objects.filter(operation_id=search).values_list("run_id", flat=True).first()
        if run_id is not None:
            return run_id
    try:
        run_id = UUID(search)
    except ValueError:
        return None
    return run_id if Run.objects.filter(id=run_id).exists() else None
