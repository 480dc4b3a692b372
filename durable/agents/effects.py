"""What every SDK's wrapper does alike with a step's context: tool calls made together, and side-effect tools
performed once through the ledger. Imports no SDK (durable/agents/pydantic_ai, durable/agents/openai_agents).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from durable.agents.bridge import Ask
from durable.context import Context
from durable.downstream import Downstream
from durable.engine.errors import NonRetryableError, OperationConflict


@dataclass(frozen=True)
class Operation:
    """What a side-effect tool returns: the operation durable performs for it through the ledger.

    `business_key` names the operation (with the run and the tool's declared action it makes the operation id,
    the downstream's Idempotency-Key): the same on every re-execution, and never text the model chose on its own.
    `payload` is what the downstream is sent.
    """

    business_key: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class SideEffectTool:
    """A tool whose call is an external action: performed once through the ledger, as `action`, by `downstream`.

    The tool's body returns the `Operation` to perform (its business key and payload); it may read what it needs
    for that, and what it returns is recorded. `action` must be among the step's declared side effects.
    """

    action: str
    downstream: Downstream


Effect = tuple[Ask, SideEffectTool, Operation]
REFUSED = ("durable did not do this: {conflict}. It was done once already under this business key with other "
           "arguments; it is not done again.")


def tool_value_outcome(value: Any) -> dict[str, Any]:
    """A tool's value as its call's outcome is recorded: the operation a side-effect tool asked for, or the value as
    JSON (NonRetryableError when it has none)."""
    if isinstance(value, Operation):
        return {"operation": {"business_key": value.business_key, "payload": to_jsonable_python(value.payload)}}
    try:
        return {"return": to_jsonable_python(value)}
    except PydanticSerializationError as exc:
        raise NonRetryableError(f"the tool's result cannot be recorded as JSON: {exc}",
                                kind="result_not_storable") from None


def operation_of(outcome: Mapping[str, Any]) -> Operation | None:
    """The operation a side-effect tool asked for, or None when it answered the model instead."""
    asked = outcome.get("operation")
    return Operation(asked["business_key"], asked["payload"]) if asked is not None else None


def asked_position(order: list[str], ask: Ask) -> int:
    """Where the model asked for this tool call among the calls of its last response (those it did not name last)."""
    try:
        return order.index(ask.tool_call_id or "")
    except ValueError:
        return len(order)


def together(ctx: Context, calls: list[tuple[str, Callable[[], dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Activities made at once (`ctx.parallel`), one alone as a plain activity; results in the order given."""
    if len(calls) == 1:
        name, fn = calls[0]
        return [ctx.activity(name, fn)]
    return list(ctx.parallel(*(ctx.call(name, fn) for name, fn in calls)))


def perform(ctx: Context, effects: list[Effect], give: Callable[[Ask, Any], None],
            refuse: Callable[[Ask, OperationConflict], None]) -> None:
    """The side effects the tools described: at once, each once; one the ledger refuses is told to the model
    (`refuse`), the others' results given to their tools (`give`)."""
    if len(effects) > 1:
        try:
            results = ctx.parallel(*(ctx.effect(declared.action, business_key=op.business_key,
                                                downstream=declared.downstream, payload=op.payload)
                                     for _, declared, op in effects))
        except OperationConflict:
            pass  # refused at Prepare, before anything was sent: one by one, so only that one is refused
        else:
            for (ask, _, _), result in zip(effects, results, strict=True):
                give(ask, result)
            return
    for ask, declared, op in effects:
        try:
            result = ctx.side_effect(declared.action, business_key=op.business_key, downstream=declared.downstream,
                                     payload=op.payload)
        except OperationConflict as conflict:
            refuse(ask, conflict)
        else:
            give(ask, result)
