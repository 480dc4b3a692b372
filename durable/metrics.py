"""The Prometheus metrics durable counts, shared by every web and worker process of a machine.

prometheus_client runs in multiprocess mode: each process writes its counters to its own
files in DURABLE_METRICS_DIR (PROMETHEUS_MULTIPROC_DIR), and /metrics (durable.exposition)
adds up the files of every process, live or dead. Labels are bounded: workflow names and
versions come from registered workflows (a run can only start on one), actions from the
side effects steps declare, reconciliation outcomes from OUTCOMES. Nothing here reads the
database: gauges of what is true now are read at scrape time (durable.exposition).
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, values
from prometheus_client.mmap_dict import MmapedDict

from durable.conf import durable_settings
from durable.engine.costs import PricedUsage
from durable.engine.ledger import DECISIONS


def directory() -> str:
    """The shared directory, making sure this process writes there before any metric exists."""
    configured = durable_settings.DURABLE_METRICS_DIR or Path(tempfile.gettempdir()) / f"durable-metrics-{os.getuid()}"
    path = os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(configured))
    os.makedirs(path, exist_ok=True)
    if not getattr(values.ValueClass, "_multiprocess", False):
        # prometheus_client chooses its mode when first imported; a script that imported it
        # before loading the settings got in-memory values nobody else would ever see.
        values.ValueClass = values.get_value_class()
    return path


directory()

WORKFLOW = ("workflow", "version")
RESUME_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

WORKFLOW_RESUMES = Counter(
    "workflow_resume_total", "Runs a worker took up again after they had run before "
    "(next time slice, due retry, decided approval, resolved operation, crashed worker)", WORKFLOW)
RESUME_LATENCY = Histogram(
    "resume_latency_seconds", "Seconds from a run becoming due again to a worker claiming it",
    WORKFLOW, buckets=RESUME_BUCKETS)
CHECKPOINT_RESTORE_FAILURES = Counter(
    "checkpoint_restore_failure_total", "Newest checkpoints a worker could not read back "
    "(no upcaster for their schema, or a state that does not validate)", WORKFLOW)
REPLAYED_STEPS = Counter(
    "replayed_step_total", "Steps executed again that reused at least one recorded activity result", WORKFLOW)
REUSED_RESULTS = Counter(
    "task_result_reused_total", "Recorded activity results returned instead of calling again", WORKFLOW)
VERSION_MISMATCHES = Counter(
    "workflow_version_mismatch_total", "Runs the replay contract stopped in BLOCKED_VERSION, by the refusal's kind",
    (*WORKFLOW, "reason"))
ACTIVITY_RETRIES = Counter(
    "activity_retry_total", "Retries scheduled after a retryable error in a step", WORKFLOW)
RETRIES_EXHAUSTED = Counter(
    "retry_exhausted_total", "Steps that failed with a retryable error after their last allowed attempt", WORKFLOW)
NON_RETRYABLE_FAILURES = Counter(
    "non_retryable_failure_total", "Steps that failed with an error that no retry can fix", WORKFLOW)
STEP_BUDGETS_EXHAUSTED = Counter(
    "step_budget_exhausted_total", "Runs ended FAILED because they used their step budget (max_visits): "
    "a loop that never finished", WORKFLOW)
WAITS_STARTED = Counter(
    "run_wait_total", "Times a run parked on a timer, an event from outside or child runs, by kind",
    (*WORKFLOW, "kind"))
EVENTS_RECEIVED = Counter(
    "event_received_total", "Events from outside put in a run's mailbox (duplicate: sent again with the same "
    "Idempotency-Key, kept once)", ("workflow", "outcome"))

# Model calls (durable/engine/costs.py), counted once each, when the answer is recorded: a result reused on replay is
# not new spending. `model` is what the call's usage names, a model the team chose to call (bounded like actions).
LLM_TOKENS = Counter(
    "llm_tokens_total", "Tokens model calls used, by kind (input, output)", ("workflow", "model", "kind"))
LLM_COST = Counter(
    "llm_cost_total", "What priced model calls cost, in the currency of DURABLE_LLM_PRICES", ("workflow", "model"))
LLM_UNPRICED_TOKENS = Counter(
    "llm_unpriced_tokens_total", "Tokens of model calls whose model has no price in DURABLE_LLM_PRICES: their cost "
    "is unknown, and not in llm_cost_total", ("workflow", "model"))
BUDGETS_EXHAUSTED = Counter(
    "llm_budget_exhausted_total", "Runs stopped before a model call by their budget: each waits in NEEDS_ATTENTION "
    "for an operator to raise it or cancel the run", WORKFLOW)
LIMIT_THROTTLED = Counter(
    "limit_throttled_total", "Calls that found their named limit full (they waited in their thread or parked their "
    "run), and pauses a provider's Retry-After put on the limit", ("limit",))
LIMIT_RETAKEN = Counter(
    "limit_start_retaken_total", "Calls under a rate limit that would have left later than the rate's margin after "
    "their recorded start, and took a new start first", ("limit",))

DUPLICATES_PREVENTED = Counter(
    "side_effect_duplicate_prevented_total", "Side effects re-entered after they succeeded: the recorded "
    "result was returned and nothing was sent", ("action",))
IDEMPOTENCY_KEY_HITS = Counter(
    "idempotency_key_hit_total", "Requests sent again with the same Idempotency-Key to a downstream that "
    "honours keys; action=start_run: a start request retried with its key got the run it started", ("action",))
UNKNOWN_OPERATIONS = Counter(
    "side_effect_unknown_total", "Operations marked UNKNOWN: an operator must say whether they happened", ("action",))
RECONCILIATIONS = Counter(
    "reconciliation_total", "Decisions on possibly performed operations, by the reconciler or an operator",
    ("action", "outcome"))
REFUSALS = Counter(
    "refused_attempt_total", "Attempts refused and written to the security log (durable.security): failed or "
    "throttled logins, forbidden actions, stale, late or self decisions, bad API tokens", ("kind", "source"))

# The reconciler's decisions (durable.runtime.reconciler) and an operator's resolutions.
OUTCOMES = frozenset({*DECISIONS, "resolved_succeeded", "resolved_did_not_happen"})
START_RUN = "start_run"  # the idempotency_key_hit_total action of the API's start-run key
# Refusals of the replay contract (durable.engine.contract) and the replay violation.
WAIT_KINDS = ("timer", "event", "child")
BLOCK_REASONS = ("version_missing", "topology_changed", "release_changed", "schema_unreadable", "replay_violation")
PER_WORKFLOW = (WORKFLOW_RESUMES, RESUME_LATENCY, CHECKPOINT_RESTORE_FAILURES, REPLAYED_STEPS, REUSED_RESULTS,
                ACTIVITY_RETRIES, RETRIES_EXHAUSTED, NON_RETRYABLE_FAILURES, STEP_BUDGETS_EXHAUSTED, BUDGETS_EXHAUSTED)
PER_ACTION = (DUPLICATES_PREVENTED, IDEMPOTENCY_KEY_HITS, UNKNOWN_OPERATIONS)
_declared: set[tuple[str, int]] = set()


def refused(kind: str, source: str) -> None:
    REFUSALS.labels(kind, source).inc()


def run_resumed(workflow: str, version: int, waited_seconds: float | None) -> None:
    WORKFLOW_RESUMES.labels(workflow, str(version)).inc()
    if waited_seconds is not None:
        RESUME_LATENCY.labels(workflow, str(version)).observe(max(waited_seconds, 0.0))


def checkpoint_unreadable(workflow: str, version: int) -> None:
    CHECKPOINT_RESTORE_FAILURES.labels(workflow, str(version)).inc()


def run_blocked(workflow: str, version: int, reason: str) -> None:
    VERSION_MISMATCHES.labels(workflow, str(version), reason).inc()


def result_reused(workflow: str, version: int) -> None:
    REUSED_RESULTS.labels(workflow, str(version)).inc()


def step_replayed(workflow: str, version: int) -> None:
    REPLAYED_STEPS.labels(workflow, str(version)).inc()


def retry_scheduled(workflow: str, version: int) -> None:
    ACTIVITY_RETRIES.labels(workflow, str(version)).inc()


def retries_exhausted(workflow: str, version: int) -> None:
    RETRIES_EXHAUSTED.labels(workflow, str(version)).inc()


def failed_for_good(workflow: str, version: int) -> None:
    NON_RETRYABLE_FAILURES.labels(workflow, str(version)).inc()


def step_budget_exhausted(workflow: str, version: int) -> None:
    STEP_BUDGETS_EXHAUSTED.labels(workflow, str(version)).inc()


def wait_started(workflow: str, version: int, kind: str) -> None:
    WAITS_STARTED.labels(workflow, str(version), kind).inc()


def event_received(workflow: str, duplicate: bool) -> None:
    EVENTS_RECEIVED.labels(workflow, "duplicate" if duplicate else "delivered").inc()
def model_called(workflow: str, priced: PricedUsage) -> None:
    usage = priced.usage
    LLM_TOKENS.labels(workflow, usage.model, "input").inc(usage.input_tokens)
    LLM_TOKENS.labels(workflow, usage.model, "output").inc(usage.output_tokens)
    if priced.cost is None:
        LLM_UNPRICED_TOKENS.labels(workflow, usage.model).inc(usage.tokens)
    else:
        LLM_COST.labels(workflow, usage.model).inc(float(priced.cost))  # a sample is a float; the run keeps Decimal


def budget_exhausted(workflow: str, version: int) -> None:
    BUDGETS_EXHAUSTED.labels(workflow, str(version)).inc()


def limit_throttled(limit: str) -> None:
    LIMIT_THROTTLED.labels(limit).inc()


def limit_retaken(limit: str) -> None:
    LIMIT_RETAKEN.labels(limit).inc()


def duplicate_prevented(action: str) -> None:
    DUPLICATES_PREVENTED.labels(action).inc()


def idempotency_key_hit(action: str) -> None:
    IDEMPOTENCY_KEY_HITS.labels(action).inc()


def operation_unknown(action: str) -> None:
    UNKNOWN_OPERATIONS.labels(action).inc()


def reconciled(action: str, outcome: str) -> None:
    if outcome not in OUTCOMES:  # an unbounded label would grow every process's files forever
        raise ValueError(f"reconciliation outcome {outcome!r} is not one of {sorted(OUTCOMES)}")
    RECONCILIATIONS.labels(action, outcome).inc()


def declare_known_series() -> None:
    """Give every label set of the registered workflows a zero in this process, once.

    The page then lists every series from the start, and an alert sees a counter go from 0
    to 1 instead of a new series appearing at 1 (which `increase()` cannot see).
    """
    from durable.registry import registry  # the registry imports workflow code; metrics must not

    for workflow in registry.all():
        if (workflow.name, workflow.version) in _declared:
            continue
        labels = (workflow.name, str(workflow.version))
        for family in PER_WORKFLOW:
            family.labels(*labels)
        for reason in BLOCK_REASONS:
            VERSION_MISMATCHES.labels(*labels, reason)
        for kind in WAIT_KINDS:
            WAITS_STARTED.labels(*labels, kind)
        for action in {effect for step in workflow.steps for effect in step.side_effects}:
            for family in PER_ACTION:
                family.labels(action)
            for outcome in OUTCOMES:
                RECONCILIATIONS.labels(action, outcome)
        _declared.add((workflow.name, workflow.version))
    IDEMPOTENCY_KEY_HITS.labels(START_RUN)


# Reading what every process counted: /metrics, the console's overview, tests.

def shared_registry() -> CollectorRegistry:
    """A fresh registry over the shared directory: the sum over all processes, live or dead."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory())
    return registry


def totals(sample_names: Iterable[str]) -> dict[str, float]:
    """Each named counter sample (e.g. `side_effect_unknown_total`) summed over its labels and processes.

    Reads only the counter files and parses only the wanted entries: the console's overview
    asks on every refresh, and parsing every series of every process costs tens of ms.
    """
    wanted = {name: 0.0 for name in sample_names}
    quoted = {json.dumps(name): name for name in wanted}
    for path in Path(directory()).glob("counter_*.db"):
        for key, count, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            for needle, name in quoted.items():
                if needle in key and json.loads(key)[1] == name:  # [metric, sample, labels, help]
                    wanted[name] += count
    return wanted


def value(sample_name: str, **labels: str) -> float:
    """One sample summed over the processes (and over the labels not given)."""
    return sum(sample.value for metric in shared_registry().collect() for sample in metric.samples
               if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items()))


def clear_directory() -> None:
    """Start every count from zero. Only when every process that writes here starts anew
    (the demo launcher, a deploy script before it starts web and workers): a running
    process would keep writing to a file nobody reads any more."""
    for path in Path(directory()).glob("*.db"):
        path.unlink(missing_ok=True)
