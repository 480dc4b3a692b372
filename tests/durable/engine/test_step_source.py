"""What the static reading of a step finds in its business keys, on the shapes real steps take.

Each step below is read, never run. `certain` is what durable.E003 reports (a random or time-based
value reaches the key on every path), `suspects` what durable.W003 reports (on some path only).
"""
from __future__ import annotations

import random
import time
import uuid
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from durable.engine.step_source import SIDE_EFFECT, Call, read_step

payments: Any = None


def key_of(step: Any) -> Call:
    [call] = read_step(step).of_kind(SIDE_EFFECT)
    return call


def line_of(step: Any, text: str) -> int:
    """The line in this file of the first line of `step` containing `text`."""
    import inspect

    lines, first = inspect.getsourcelines(step)
    return first + next(n for n, line in enumerate(lines) if text in line)


# -- correct steps: nothing reported -------------------------------------------------


def loop_over_tool_calls(ctx: Any, state: Any) -> Any:
    # The shape: a dict of results keyed by each call's id, stamped with the clock.
    results = {}
    for c in state.tool_calls:
        results[c["id"]] = {"at": timezone.now().isoformat(), "call": c}
        ctx.side_effect("tool", business_key=f"{state.order_id}:{c['id']}", downstream=payments, payload=c)
    state.results = results
    return state


def dict_builder(ctx: Any, state: Any) -> Any:
    payload = {"order": state.order_id, "sent_at": time.time(), "nonce": str(uuid.uuid4())}
    payload["retry_token"] = uuid.uuid4().hex
    ctx.side_effect("refund", business_key=state.order_id, downstream=payments, payload=payload)
    return state


def list_builder(ctx: Any, state: Any) -> Any:
    lines = []
    for item in state.items:
        lines.append({"sku": item["sku"], "stamp": datetime.now().isoformat()})
    ctx.side_effect("ship", business_key=state.items[0]["sku"], downstream=payments, payload={"lines": lines})
    return state


def comprehensions(ctx: Any, state: Any) -> Any:
    stamped = {c["id"]: timezone.now() for c in state.calls}
    jitter = [random.random() for _ in state.calls]
    ids = sorted(c["id"] for c in state.calls)
    ctx.side_effect("batch", business_key=",".join(ids), downstream=payments, payload={"n": len(stamped) + len(jitter)})
    return state


def augmented_assignment(ctx: Any, state: Any) -> Any:
    elapsed = 0.0
    elapsed += time.monotonic()
    key = state.order_id
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={"elapsed": elapsed})
    return state


def walrus(ctx: Any, state: Any) -> Any:
    if (order := state.order_id) and (started := time.time()):
        ctx.side_effect("refund", business_key=order, downstream=payments, payload={"started": started})
    return state


def tuple_unpacking(ctx: Any, state: Any) -> Any:
    key, stamp = state.order_id, timezone.now()
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={"at": str(stamp)})
    return state


def attribute_of_the_state(ctx: Any, state: Any) -> Any:
    state.sent_at = time.time()
    ctx.side_effect("refund", business_key=state.order_id, downstream=payments, payload={})
    return state


def recorded_activity(ctx: Any, state: Any) -> Any:
    key = ctx.activity("new_key", lambda: str(uuid.uuid4()))
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


@pytest.mark.parametrize("step", [loop_over_tool_calls, dict_builder, list_builder, comprehensions,
                                  augmented_assignment, walrus, tuple_unpacking, attribute_of_the_state,
                                  recorded_activity])
def test_a_key_built_from_the_state_reports_nothing(step):
    call = key_of(step)
    assert (call.unstable, call.suspects) == ((), ())


# -- certain: the clock or a random value reaches the key on every path (durable.E003) ----


def in_the_key_itself(ctx: Any, state: Any) -> Any:
    ctx.side_effect("refund", business_key=f"{state.order_id}-{uuid.uuid4()}", downstream=payments, payload={})
    return state


def through_a_chain_of_names(ctx: Any, state: Any) -> Any:
    stamp = f"{state.order_id}-{time.time()}"
    key = stamp.lower()
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def through_a_walrus(ctx: Any, state: Any) -> Any:
    if key := str(uuid.uuid4()):
        ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def through_matched_unpacking(ctx: Any, state: Any) -> Any:
    order, key = state.order_id, f"{state.order_id}@{timezone.now():%s}"
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={"order": order})
    return state


@pytest.mark.parametrize("step, culprits", [
    (in_the_key_itself, ("uuid.uuid4",)),
    (through_a_chain_of_names, ("time.time",)),
    (through_a_walrus, ("uuid.uuid4",)),
    (through_matched_unpacking, ("timezone.now",)),
])
def test_a_key_built_from_the_clock_on_every_path_is_certain(step, culprits):
    call = key_of(step)
    assert call.unstable == culprits and call.suspects == ()


# -- suspects: on some path only (durable.W003, with the line) ------------------------


def in_a_branch(ctx: Any, state: Any) -> Any:
    ctx.side_effect("refund", business_key=state.order_id or str(uuid.uuid4()), downstream=payments, payload={})
    return state


def a_name_given_two_values(ctx: Any, state: Any) -> Any:
    key = str(time.time_ns())
    if state.order_id:
        key = state.order_id
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def appended_to_a_list(ctx: Any, state: Any) -> Any:
    keys = [state.order_id]
    keys.append(str(uuid.uuid4()))
    ctx.side_effect("refund", business_key=keys[-1], downstream=payments, payload={})
    return state


def stored_in_a_dict(ctx: Any, state: Any) -> Any:
    keys = {}
    keys["refund"] = f"r-{random.randint(1, 9)}"
    ctx.side_effect("refund", business_key=keys["refund"], downstream=payments, payload={})
    return state


def a_loop_variable(ctx: Any, state: Any) -> Any:
    for key in [state.order_id, str(uuid.uuid1())]:
        ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def an_attribute_set_in_the_step(ctx: Any, state: Any) -> Any:
    state.refund_key = f"{state.order_id}-{datetime.now():%H}"
    ctx.side_effect("refund", business_key=state.refund_key, downstream=payments, payload={})
    return state


def augmented_key(ctx: Any, state: Any) -> Any:
    key = state.order_id
    key += f"-{time.time()}"
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def unmatched_unpacking(ctx: Any, state: Any) -> Any:
    key, stamp = state.pair_with(timezone.now())
    ctx.side_effect("refund", business_key=key, downstream=payments, payload={"at": stamp})
    return state


@pytest.mark.parametrize("step, culprit, text", [
    (in_a_branch, "uuid.uuid4", "business_key="),
    (a_name_given_two_values, "time.time_ns", "time_ns()"),
    (appended_to_a_list, "uuid.uuid4", "append("),
    (stored_in_a_dict, "random.randint", "randint("),
    (a_loop_variable, "uuid.uuid1", "uuid1()"),
    (an_attribute_set_in_the_step, "datetime.now", "datetime.now()"),
    (augmented_key, "time.time", "+= f"),
    (unmatched_unpacking, "timezone.now", "timezone.now()"),
])
def test_a_key_the_clock_reaches_on_some_path_is_a_suspect_with_its_line(step, culprit, text):
    call = key_of(step)
    assert call.unstable == ()
    assert [(s.call, s.line) for s in call.suspects] == [(culprit, line_of(step, text))]


# -- guards: a step shared by versions, a change behind a patch ----------------------


def notice_from_v2(ctx: Any, state: Any) -> Any:
    ctx.side_effect("email", business_key=state.order_id, downstream=payments, payload={})
    if ctx.workflow_version >= 2:
        ctx.side_effect("sms", business_key=state.order_id, downstream=payments, payload={})
    if 2 > ctx.workflow_version:
        ctx.side_effect("letter", business_key=state.order_id, downstream=payments, payload={})
    return state


def subject_behind_a_patch(ctx: Any, state: Any) -> Any:
    if not ctx.patched("friendlier-subject"):
        subject = "About your refund"
    else:
        subject = "Your refund is on its way"
        ctx.side_effect("email", business_key=state.order_id, downstream=payments, payload={"subject": subject})
    return state


def actions_on(step: Any, version: int) -> list[str | None]:
    return [call.first for call in read_step(step).for_version(version).of_kind(SIDE_EFFECT)]


def test_a_version_guard_keeps_a_call_to_the_versions_it_allows():
    assert actions_on(notice_from_v2, 1) == ["email", "letter"]
    assert actions_on(notice_from_v2, 2) == ["email", "sms"]
    sms = read_step(notice_from_v2).of_kind(SIDE_EFFECT)[1]
    assert [(g.kind, g.op, g.value, g.holds) for g in sms.guards] == [("version", ">=", 2, True)]


def test_a_patch_guard_leaves_the_call_on_every_version_and_names_the_patch_on_its_new_branch():
    [call] = read_step(subject_behind_a_patch).of_kind(SIDE_EFFECT)
    assert [(g.kind, g.patch, g.holds) for g in call.guards] == [("patch", "friendlier-subject", True)]
    assert call.patches == ("friendlier-subject",) and call.allows_version(1) and call.allows_version(7)
