"""Workflows for the names a step catches (tests/durable/runtime/test_author_names.py): a step that answers with a
refused approval, one that answers with a taken child key, one that reads an event's declared model. Each can fail
once after it answered (`fail_once`), so the test sees what the same visit gets when it runs again."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from durable import (
    ApprovalPreconditionFailed,
    ChildKeyTaken,
    Context,
    RetryableError,
    RetryPolicy,
    Revalidation,
    Workflow,
    register,
)

FAST_RETRY = RetryPolicy(max_attempts=3, initial_interval=0.01, max_interval=0.05)


class AuthorState(BaseModel):
    marker: str  # a file: fail_once fails the step once, before it exists
    facts: str = ""  # a file the approval's revalidation reads: "ok" holds, any other text fails
    child_key: str = ""
    fail_once: bool = False
    answer: str = ""
    payload_type: str = ""


def revalidate_facts(snapshot: dict[str, str]) -> Revalidation:
    text = Path(snapshot["facts"]).read_text()
    return Revalidation(current={"facts": text}, problems=() if text == "ok" else (f"the order is {text}",))


def _fail_once(state: AuthorState) -> None:
    """A retryable failure after the step answered, once: the same visit runs again."""
    marker = Path(state.marker)
    if state.fail_once and not marker.exists():
        marker.write_text("failed once")
        raise RetryableError("once more")


asker = register(Workflow(name="test-author-approval", version=1, state=AuthorState, input=AuthorState,
                          retry=FAST_RETRY))


@asker.step
def propose(ctx: Context, state: AuthorState) -> AuthorState:
    try:
        ctx.request_approval("refund", snapshot={"facts": state.facts}, approve={"amount": "10.00"},
                             revalidate=revalidate_facts, expires_in=timedelta(days=1))
        state.answer = "approved"
    except ApprovalPreconditionFailed as refused:  # the tool's answer: the run goes on
        state.answer = f"refused: {'; '.join(refused.problems)}"
    _fail_once(state)
    return state


delegator = register(Workflow(name="test-author-parent", version=1, state=AuthorState, input=AuthorState,
                              retry=FAST_RETRY))


@delegator.step
def delegate(ctx: Context, state: AuthorState) -> AuthorState:
    try:
        child = ctx.start_child("test-child", input={"value": 1}, business_key=state.child_key)
        state.answer = f"started {child.run_id}"
    except ChildKeyTaken as taken:
        state.answer = f"taken by {taken.holder}"
    _fail_once(state)
    return state


class Rating(BaseModel):
    text: str
    stars: int = 0


listener = register(Workflow(name="test-author-event", version=1, state=AuthorState, input=AuthorState,
                             retry=FAST_RETRY, events={"rated": Rating}))


@listener.step
def listen(ctx: Context, state: AuthorState) -> AuthorState:
    event = ctx.wait_for_event("rated")
    assert event is not None  # no timeout: it returns only with an event
    rating: Rating = event.payload
    state.payload_type, state.answer = type(rating).__name__, f"{rating.text} ({rating.stars})"
    _fail_once(state)
    return state
