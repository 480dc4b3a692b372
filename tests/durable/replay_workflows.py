"""Workflows for the replay tests: the issue-40 story of a step that emails the customer, then waits for the reply,
while a developer rewords the email's subject. `DEPLOYED` is the code as deployed now: a test changes it where a
developer would change the step's text and restart the workers. Registered in the test process."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from durable import Context, OperationConflict, Workflow, register
from durable.downstream import get_downstream
from tests.durable.ledger_workflows import probe  # registers the probe downstream

FIRST_SUBJECT, REWORDED_SUBJECT = "About your refund", "Your refund is on its way"
DEPLOYED: dict[str, Any] = {"subject": FIRST_SUBJECT, "patch": "", "route": "reply"}


def deploy(subject: str = FIRST_SUBJECT, patch: str = "", route: str = "reply") -> None:
    """The code as a deploy leaves it: the subject the step writes, the patch that guards a reworded one, the route
    triage takes."""
    DEPLOYED.update(subject=subject, patch=patch, route=route)


@pytest.fixture
def first_deploy() -> Iterator[None]:
    """Each test starts on the first deploy, with the probe's calls forgotten, and leaves it so."""
    probe.reset()
    deploy()
    yield
    deploy()


class TicketInput(BaseModel):
    ticket: str = "T-1"
    swallow_errors: bool = False  # the step catches every error around the email (as a tool loop might)
    ask_twice: bool = False  # the "model" asks for the email again with another subject, in the same execution


class TicketState(TicketInput):
    email: dict[str, Any] | None = None
    reply: Any = None
    told: list[str] = []


reply_email = register(Workflow(name="test-reply-email", version=1, state=TicketState, input=TicketInput))


def _subject(ctx: Context) -> str:
    if DEPLOYED["patch"] and ctx.patched(DEPLOYED["patch"]):
        return REWORDED_SUBJECT
    return str(DEPLOYED["subject"])


@reply_email.step(side_effects=["send_email"])
def ask_customer(ctx: Context, state: TicketState) -> TicketState:
    payload = {"to": "ann@example.com", "subject": _subject(ctx), "body": "Reply to this email."}
    try:
        state.email = ctx.side_effect("send_email", business_key=f"{state.ticket}:ask", downstream=get_downstream("probe"),
                                      payload=payload)
    except Exception as error:  # noqa: BLE001  what a careless tool loop does: the run is held all the same
        if not state.swallow_errors:
            raise
        state.told.append(str(error))
    if state.ask_twice:
        try:
            ctx.side_effect("send_email", business_key=f"{state.ticket}:ask", downstream=get_downstream("probe"),
                            payload={**payload, "subject": "Re: " + payload["subject"]})
        except OperationConflict as refused:  # told to the model as the tool's answer: not a code change
            state.told.append(str(refused))
    reply = ctx.wait_for_event("reply", timeout=timedelta(days=3))
    state.reply = None if reply is None else reply.payload
    return state


@reply_email.step
def close(ctx: Context, state: TicketState) -> TicketState:
    return state


# -- A step that chooses its route: a deploy may make it choose another ----------------------------------------------

triage_flow = register(Workflow(name="test-replay-route", version=1, state=TicketState, input=TicketInput))


@triage_flow.step(next=["refund", "reply"])
def triage(ctx: Context, state: TicketState) -> Any:
    ctx.activity("classify", str, state.ticket)
    return triage_flow.goto(str(DEPLOYED["route"]), state)


@triage_flow.step
def refund(ctx: Context, state: TicketState) -> TicketState:
    return state


@triage_flow.step
def reply(ctx: Context, state: TicketState) -> TicketState:
    return state
