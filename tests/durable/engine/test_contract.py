"""The replay contract's rule (durable/engine/contract.py): may this worker resume this run, and if not, why."""
import pytest

from durable.engine.contract import PINNABLE, Contract, Refusal, check_contract, upcast
from durable.engine.fingerprint import StepShape, topology_fingerprint

STEPS = (StepShape("plan"), StepShape("refund", ("refund",)), StepShape("notify", ("notify",)))


def pinned_to(steps=STEPS, version: int = 1, **releases: str) -> Contract:
    return Contract("claims", version, topology_fingerprint(steps), tuple(steps), releases)


def test_a_worker_with_the_runs_version_shape_and_releases_may_resume_it():
    run = pinned_to(prompt_release="p-7")
    assert check_contract(run, pinned_to(prompt_release="p-7"), pinned=PINNABLE) is None


def test_a_worker_without_the_version_refuses_and_says_how_to_go_on():
    refusal = check_contract(pinned_to(version=3), None)
    assert refusal.kind == "version_missing"
    assert refusal.message == ("this worker has no claims v3; deploy it again, or migrate the run to a version "
                               "that declares a migration from it")


def test_a_changed_topology_is_refused_with_what_changed_in_words():
    moved = (StepShape("plan"), StepShape("notify", ("notify",)), StepShape("refund", ("refund", "ticket")))
    refusal = check_contract(pinned_to(), pinned_to(moved))
    assert refusal.kind == "topology_changed"
    assert refusal.message == ("claims v1 changed since this run started: steps were reordered: "
                               "plan -> refund -> notify is now plan -> notify -> refund; "
                               "step 'refund' now performs side effect 'ticket'")


def test_a_run_recorded_without_its_topology_is_refused_by_fingerprint_alone():
    run = Contract("claims", 1, "0" * 32, ())
    refusal = check_contract(run, pinned_to())
    assert refusal == Refusal("topology_changed", "claims v1 changed since this run started: "
                                                  "its topology fingerprint differs")


def test_a_pinned_release_that_moved_is_refused_naming_both_releases():
    refusal = check_contract(pinned_to(prompt_release="p-7"), pinned_to(prompt_release="p-8"),
                             pinned=("prompt_release",))
    assert refusal.as_json() == {"kind": "release_changed", "message": "claims v1 pins prompt_release: the run "
                                 "started under 'p-7', this worker has 'p-8'"}


def test_a_release_the_workflow_does_not_pin_may_move():
    assert check_contract(pinned_to(prompt_release="p-7"), pinned_to(prompt_release="p-8"), pinned=()) is None


def test_a_release_pinned_but_absent_on_one_side_counts_as_moved():
    refusal = check_contract(pinned_to(), pinned_to(model_policy_version="m-2"), pinned=("model_policy_version",))
    assert refusal.kind == "release_changed" and "under '', this worker has 'm-2'" in refusal.message


def test_a_refusal_quoting_what_the_database_cannot_store_is_repaired_before_it_becomes_the_runs_error():
    assert Refusal("schema_unreadable", "upcaster said \x00 no").message == "upcaster said \ufffd no"


def test_upcasting_applies_each_declared_step_in_order():
    upcasters = {1: lambda s: {**s, "v2": True}, 2: lambda s: {**s, "order": [*s.get("order", []), 3]}}
    assert upcast({"order": [1]}, 1, 3, upcasters) == {"order": [1, 3], "v2": True}


def test_a_state_already_at_the_workers_schema_is_returned_as_it_is():
    state = {"a": 1}
    assert upcast(state, 2, 2, {}) is state


def test_a_missing_upcaster_is_refused_naming_the_gap():
    refusal = upcast({}, 1, 3, {1: lambda s: s})
    assert refusal == Refusal("schema_unreadable", "checkpoint schema v1 needs an upcaster from v2 to v3, "
                                                   "and none is declared")


def test_a_checkpoint_newer_than_the_worker_is_unreadable():
    refusal = upcast({}, 4, 2, {})
    assert refusal == Refusal("schema_unreadable", "checkpoint schema v4 is newer than this worker's v2")


@pytest.mark.parametrize("name", PINNABLE)
def test_each_pinnable_release_is_checked_when_pinned(name):
    assert check_contract(pinned_to(**{name: "a"}), pinned_to(**{name: "b"}), pinned=(name,)).kind == "release_changed"
