"""The benchmark's in-process downstream keeps the promise it declares: one outcome per key."""
from __future__ import annotations

from durable.checks import check_client_retries, check_crash_settlement, check_error_classification
from durable.tools.bench.downstream import InProcessDownstream


def test_a_repeated_idempotency_key_gets_the_first_outcome_back():
    downstream = InProcessDownstream()
    first = downstream.execute("op-1", "bench-1", {"amount": 10})
    again = downstream.execute("op-1", "bench-1", {"amount": 10})
    other = downstream.execute("op-2", "bench-2", {"amount": 10})
    assert again == first and other.external_ref != first.external_ref
    assert downstream.calls == 3 and len(downstream.outcomes) == 2
    assert downstream.lookup("op-1", "bench-1", {}) == first and downstream.lookup("op-3", "bench-3", {}) is None


def test_it_passes_the_launch_checks_every_downstream_must():
    downstream = [InProcessDownstream()]
    assert check_crash_settlement(downstream) == check_client_retries(downstream) == []
    assert check_error_classification(downstream) == []
