"""A state or an activity's result over DURABLE_MAX_VALUE_BYTES fails the step for good, with an error naming the
value and its size: not a database error, not a retry that would choose the same value again."""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from durable import OnActiveBusinessKey, Workflow, register, services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, StoredValue
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)


class Big(BaseModel):
    size: int = 0
    where: str = "state"
    text: str = ""


big = Workflow(name="test-too-large", version=1, state=Big, input=Big,
               on_active_business_key=OnActiveBusinessKey.START_ANOTHER)


@big.step
def grow(ctx: Any, state: Big) -> Big:
    if state.where == "result":
        state.text = ctx.activity("fetch", lambda: "r" * state.size)[:10]
    else:
        state.text = "s" * state.size
    return state


register(big)


@pytest.mark.parametrize(("where", "kind", "what"), [
    ("state", "state_too_large", "the state after step 'grow'"),
    ("result", "result_too_large", "the result of activity 'fetch'"),
])
def test_a_value_over_the_limit_fails_the_run_naming_it_and_its_size(settings, where, kind, what):
    settings.DURABLE_MAX_VALUE_BYTES = 1_000_000
    run, _ = services.start_run(workflow="test-too-large", business_key=where,
                                input={"size": 2_500_000, "where": where})
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == kind, run.error
    assert run.error["message"].startswith(f"{what} weighs about 2.5 MB as JSON, over the limit of 1.0 MB")
    assert not JournalEntry.objects.filter(run=run, kind="activity").exists()  # nothing was recorded
    assert run.checkpoints.count() == 1  # the start's: the step wrote nothing
    assert not StoredValue.objects.exists()  # nor stored a large value apart (DURABLE_LARGE_VALUE_BYTES)


def test_a_value_under_the_limit_is_stored(settings):
    settings.DURABLE_MAX_VALUE_BYTES = 1_000_000
    run, _ = services.start_run(workflow="test-too-large", business_key="small", input={"size": 900_000})
    assert advance(run).status == RunStatus.SUCCEEDED
    assert list(StoredValue.objects.values_list("size", flat=True)) == [900_002]  # its text, stored apart once
