"""Workflows for the cost tests: a loop that asks a model at every visit (with and without a budget), a group of
model calls made at once, a step that catches every exception. Registered in the test process and in workers."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable import Budget, RetryPolicy, Usage, Workflow, register
from tests.durable.workflows import record_call

FAST_RETRY = RetryPolicy(max_attempts=2, initial_interval=0.01, max_interval=0.05)
MODEL = "test-model"
PRICES = {MODEL: {"input": "0.15", "output": "0.60"}}  # per million tokens: a call below costs 0.000027
INPUT_TOKENS, OUTPUT_TOKENS = 100, 20  # what each call of the scripted model uses
CALL_COST = "0.000027"  # (100 x 0.15 + 20 x 0.60) / 1,000,000


class ModelInput(BaseModel):
    calls_file: str
    rounds: int = 3
    model: str = MODEL


class ModelState(ModelInput):
    answers: list[str] = []


def scripted_model(calls_file: str, name: str, model: str) -> dict[str, Any]:
    """A model's answer as an SDK gives it: the text, the model that answered and what it used."""
    return {"text": record_call(calls_file, name), "model": model,
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS}}


def usage_of(answer: dict[str, Any]) -> Usage:
    return Usage(model=answer["model"], input_tokens=answer["usage"]["prompt_tokens"],
                 output_tokens=answer["usage"]["completion_tokens"])


def think(ctx: Any, state: ModelState) -> Any:
    n = len(state.answers) + 1
    answer = ctx.activity("llm.chat", scripted_model, state.calls_file, f"think-{n}", state.model, usage=usage_of)
    state.answers.append(answer["text"])
    return Workflow.goto("think" if len(state.answers) < state.rounds else "done", state)


def done(ctx: Any, state: ModelState) -> ModelState:
    return state


def model_loop(name: str, budget: Budget | None = None) -> Workflow:
    workflow = Workflow(name=name, version=1, state=ModelState, input=ModelInput, retry=FAST_RETRY, budget=budget)
    workflow.step(think, next=["think", "done"])
    workflow.step(done)
    return register(workflow)


model_calls = model_loop("test-model-calls")
# 120 tokens a call: three calls fit (240 used before the third), the fourth is stopped before it is made.
token_budget = model_loop("test-token-budget", Budget(tokens=300))
# 0.000027 a call: two calls fit (0.000027 used before the second), the third is stopped.
cost_budget = model_loop("test-cost-budget", Budget(cost="0.00005"))


# -- A step that catches every exception around its model call -----------------------------------------------------

def careless_think(ctx: Any, state: ModelState) -> Any:
    try:
        answer = ctx.activity("llm.chat", scripted_model, state.calls_file, f"think-{len(state.answers) + 1}",
                              state.model, usage=usage_of)
    except Exception:  # a step that means to survive a model's errors; the budget's stop is not one
        answer = {"text": "gave up"}
    state.answers.append(answer["text"])
    return Workflow.goto("think" if len(state.answers) < state.rounds else "done", state)


careless = Workflow(name="test-careless-budget", version=1, state=ModelState, input=ModelInput, retry=FAST_RETRY,
                    budget=Budget(tokens=100))
careless.step(careless_think, name="think", next=["think", "done"])
careless.step(done)
register(careless)


# -- Model calls made at once, beside a plain read ------------------------------------------------------------------

class GroupState(ModelInput):
    answers: list[Any] = []


def ask_together(ctx: Any, state: GroupState) -> GroupState:
    state.answers = ctx.parallel(
        ctx.call("llm.a", scripted_model, state.calls_file, "a", state.model, usage=usage_of),
        ctx.call("read", record_call, state.calls_file, "read"),
        ctx.call("llm.b", scripted_model, state.calls_file, "b", state.model, usage=usage_of),
    )
    return state


model_group = register(Workflow(name="test-model-group", version=1, state=GroupState, input=ModelInput,
                                retry=FAST_RETRY))
model_group.step(ask_together)


def warm_up(ctx: Any, state: GroupState) -> GroupState:
    ctx.activity("llm.warm-up", scripted_model, state.calls_file, "warm-up", state.model, usage=usage_of)
    return state


# The warm-up's 120 tokens use the budget of 100: the group after it is stopped before any of its calls is sent.
group_budget = register(Workflow(name="test-model-group-budget", version=1, state=GroupState, input=ModelInput,
                                 retry=FAST_RETRY, budget=Budget(tokens=100)))
group_budget.step(warm_up)
group_budget.step(ask_together)


def stopped_by_budget(calls_file: str, business_key: str = "COST-1") -> Any:
    """A run of test-token-budget that its budget stopped before its fourth model call: NEEDS_ATTENTION, 360 tokens
    used of 300, three step visits of `think` with one model call each."""
    from django.test import override_settings

    from durable import services
    from durable.models import Run
    from durable.runtime import executor

    with override_settings(DURABLE_LLM_PRICES=PRICES):
        run, _ = services.start_run(workflow="test-token-budget", input={"calls_file": calls_file, "rounds": 5},
                                    business_key=business_key)
        executor.advance(run.id)
    run = Run.objects.get(id=run.id)
    assert run.status == "NEEDS_ATTENTION" and run.error["kind"] == "budget_exhausted", run.error
    return run
