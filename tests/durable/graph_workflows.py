"""Workflows with routes, used by the tests: a loop, a branch, routes gone wrong, an endless loop."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable import OnActiveBusinessKey, Workflow, register
from durable.workflow import Migration

LOOP = "test-loop"


class LoopInput(BaseModel):
    limit: int = 3  # how many times `think` routes back to itself before it answers
    kind: str = "question"  # the branch `triage` takes: "refund" or anything else
    mode: str = ""  # how `plan` goes wrong: "undeclared" or "plain"


class LoopState(LoopInput):
    visited: list[str] = []
    answer: str = ""


def build_loop(version: int = 1, think_routes: tuple[str, ...] = ("think", "answer"), *, check: bool = False,
               **options: Any) -> Workflow:
    """`think` routes to itself `limit` times, then to `answer`; the last step ends the run. With `check`, a
    step `check` (routing back to `think`) is declared between them."""
    wf = Workflow(name=LOOP, version=version, state=LoopState, input=LoopInput,
                  on_active_business_key=OnActiveBusinessKey.START_ANOTHER, **options)

    @wf.step(next=think_routes)
    def think(ctx: Any, state: LoopState) -> Any:
        state.visited.append("think")
        return wf.goto("think" if state.visited.count("think") <= state.limit else "answer")

    if check:
        wf.step(lambda ctx, state: state, name="check", next=["think"])

    @wf.step
    def answer(ctx: Any, state: LoopState) -> LoopState:
        state.visited.append("answer")
        state.answer = f"thought {state.visited.count('think')} times"
        return state

    return wf


loop = register(build_loop())
# A later version whose `think` may also ask for a check: it takes over runs of v1 by a declared migration.
loop_v2 = register(build_loop(2, ("think", "check", "answer"), check=True, migrations=[
    Migration(from_version=1, step_map={"think": "think", "answer": "answer"})]))


branch = register(Workflow(name="test-branch", version=1, state=LoopState, input=LoopInput,
                           on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@branch.step(next=["refund", "reply"])
def triage(ctx: Any, state: LoopState) -> Any:
    state.visited.append("triage")
    return branch.goto("refund" if state.kind == "refund" else "reply", state)


@branch.step
def refund(ctx: Any, state: LoopState) -> Any:
    state.visited.append("refund")
    return branch.finish(state)  # the next declared step is `reply`: a refund ends the run here instead


@branch.step
def reply(ctx: Any, state: LoopState) -> LoopState:
    state.visited.append("reply")
    return state


misrouted = register(Workflow(name="test-misrouted", version=1, state=LoopState, input=LoopInput,
                              on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@misrouted.step(next=["act", "answer"])
def plan(ctx: Any, state: LoopState) -> Any:
    if state.mode == "undeclared":
        return misrouted.goto("plan", state)  # a step of the workflow, but not a route `plan` declares
    return state  # a plain state from a step with two routes: which one is not said


@misrouted.step(name="act")
@misrouted.step(name="answer")
def done(ctx: Any, state: LoopState) -> Any:
    return misrouted.finish(state)


endless = register(Workflow(name="test-endless", version=1, state=LoopState, input=LoopInput, max_visits=5,
                            on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@endless.step(next=["spin"])
def spin(ctx: Any, state: LoopState) -> Any:
    state.visited.append("spin")
    return endless.goto("spin")  # never answers: only the step budget ends it
