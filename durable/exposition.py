"""GET /metrics: every process's counters from the shared directory, plus gauges read from the database now.

Prometheus scrapes without a session, so a deployment sets DURABLE_METRICS_TOKEN and gives
the scraper `Authorization: Bearer <token>`. A logged-in user with durable.view_run may
read the page too (the console links to it); anyone else gets 401 (no credentials) or 403.
"""
from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from django.db.models import F, Min, Subquery
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from durable import metrics
from durable.budgets import WAITING_ON_BUDGET
from durable.conf import durable_settings
from durable.engine.ledger import OperationStatus
from durable.engine.states import WAITING_STATES, RunStatus
from durable.models import Checkpoint, Run, SideEffect

# Runs that wait for something other than a free worker (every waiting status, and the runs held for a person or a
# deploy): their newest checkpoint's age says how long. In the state machine's order.
HELD = tuple(status for status in RunStatus
             if status in WAITING_STATES | {RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION, RunStatus.PAUSED})


def age(now: datetime, then: datetime | None) -> float:
    """Seconds from `then` to `now`; 0 when there is no `then` (nothing waits)."""
    return max((now - then).total_seconds(), 0.0) if then is not None else 0.0


# The gauges the apps built on the core add (approvals: its pending requests), read at scrape time too.
Gauges = Callable[[datetime], Iterable[GaugeMetricFamily]]
_app_gauges: dict[str, Gauges] = {}


def add_gauges(name: str, read: Gauges) -> None:
    """Called from an app's ready(): `read(now)` yields its families at every scrape."""
    _app_gauges[name] = read


class DatabaseGauges(Collector):
    """What is true now, read at scrape time: one aggregate query per family, none per run."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        yield checkpoint_ages(now)
        yield wait_overdue(now)
        for read in _app_gauges.values():
            yield from read(now)
        yield from limit_gauges()
        unknown = GaugeMetricFamily("side_effect_unknown_operations",
                                    "Operations UNKNOWN now, waiting for an operator's resolution")
        unknown.add_metric([], SideEffect.objects.filter(status=OperationStatus.UNKNOWN).count())
        yield unknown
        over_budget = GaugeMetricFamily("runs_waiting_on_budget", "Runs their budget stopped before a model call, "
                                        "waiting now for an operator to raise it or cancel them")
        over_budget.add_metric([], Run.objects.filter(WAITING_ON_BUDGET).count())  # NEEDS_ATTENTION: few rows
        yield over_budget
        paused = GaugeMetricFamily("runs_paused", "Runs paused now, by an operator or their workflow's kill switch "
                                   "(durable/pauses.py), until someone resumes them")
        paused.add_metric([], Run.objects.filter(status=RunStatus.PAUSED).count())  # run_status_created's range
        yield paused


def limit_gauges() -> Iterator[GaugeMetricFamily]:
    """Per named limit (every key together): calls in flight (and room granted to woken runs), and runs parked
    waiting for room. Two queries, whatever the number of runs."""
    from durable.runtime.limits import declared
    from durable.store.limits import use_by_key

    try:
        names = set(declared())
    except ValueError:  # durable.E045 names the wrong setting
        names = set()
    in_use = GaugeMetricFamily("limit_in_use", "Calls in flight under a named limit, with room granted to woken runs "
                               "not yet taken", labels=["limit"])
    waiting = GaugeMetricFamily("limit_waiting_runs", "Runs parked waiting for a named limit's room",
                                labels=["limit"])
    totals: dict[str, list[int]] = {name: [0, 0] for name in names}
    for row in use_by_key(float(durable_settings.DURABLE_PENDING_GRACE_SECONDS)):
        total = totals.setdefault(row.limit, [0, 0])
        total[0] += row.in_use
        total[1] += row.waiting
    for name, (used, parked) in sorted(totals.items()):
        in_use.add_metric([name], used)
        waiting.add_metric([name], parked)
    yield in_use
    yield waiting


def checkpoint_ages(now: datetime) -> GaugeMetricFamily:
    """Per held status, the age of the newest checkpoint of the run held longest (0 when none is): one query.

    Parked runs (WAITING) may be millions, all cheap: for them the run parked longest is found by its index
    (run_status_updated; its last change is the park) rather than by reading every one of their checkpoints
    (2.7 s at a million parked runs). Its age grows while the run sleeps, by design: a run told to sleep three days
    is three days old before it wakes. What says a parked run is late is run_wait_overdue_seconds.
    """
    family = GaugeMetricFamily("checkpoint_age_seconds", "Seconds since the newest checkpoint of the "
                               "longest-waiting run in each waiting status", labels=["status"])
    # A run's newest checkpoint is the one at its checkpoint_seq: a join on the (run, seq) key.
    newest = Checkpoint.objects.filter(seq=F("run__checkpoint_seq")).order_by()
    few = (newest.filter(run__status__in=[status for status in HELD if status != RunStatus.WAITING])
           .values_list("run__status").annotate(oldest=Min("created_at")))
    parked_longest = Run.objects.filter(status=RunStatus.WAITING).order_by("updated_at").values("id")[:1]
    parked = newest.filter(run_id=Subquery(parked_longest)).values_list("run__status", "created_at")
    oldest = dict(few.union(parked, all=True))
    for status in HELD:
        family.add_metric([status.value], age(now, oldest.get(status.value)))
    return family


def wait_overdue(now: datetime) -> GaugeMetricFamily:
    """How long ago the most overdue parked run fell due without being woken: one read of the run_wake_due index.

    The sweeper (or a timer it armed) wakes a run within a sweep of its due time; a value that keeps growing means
    no sweeper runs, or it cannot keep up (the DurableWaitOverdue alert).
    """
    family = GaugeMetricFamily("run_wait_overdue_seconds", "Seconds since the most overdue parked run's timer or "
                               "event deadline passed without it being woken (0 when none is overdue)")
    due = Run.objects.filter(status=RunStatus.WAITING, next_attempt_at__lte=Now()).aggregate(
        oldest=Min("next_attempt_at"))["oldest"]
    family.add_metric([], age(now, due))
    return family


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the caller may read the metrics; otherwise the answer that says why not."""
    token = durable_settings.DURABLE_METRICS_TOKEN
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer":
        if hmac.compare_digest(presented.strip().encode(), token.encode()):
            return None
        return HttpResponse("wrong metrics token\n", status=403, content_type="text/plain")
    if request.user.is_authenticated:
        if request.user.has_perm("durable.view_run"):
            return None
        return HttpResponse("reading metrics needs the durable.view_run permission\n", status=403,
                            content_type="text/plain")
    refused = HttpResponse("log in, or send Authorization: Bearer <DURABLE_METRICS_TOKEN>\n", status=401,
                           content_type="text/plain")
    refused["WWW-Authenticate"] = 'Bearer realm="durable metrics"'
    return refused


@require_safe
def metrics_page(request: HttpRequest) -> HttpResponse:
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    metrics.declare_known_series()
    registry = metrics.shared_registry()
    registry.register(DatabaseGauges())
    # The text format Prometheus asks for in its Accept header (OpenMetrics, or the classic 0.0.4).
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(registry), content_type=content_type)
