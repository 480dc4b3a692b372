"""DurableAgent: an existing OpenAI Agents SDK agent, run inside a workflow step so that a crash, a retry or a wait
for a human never asks its model again for what it answered, nor does a side effect twice.

`DurableAgent(agent, side_effects=..., approvals=...).run(ctx, input, context=...)` runs the agent as
`Runner.run(agent, input, context=...)` would, on copies of the agent and of every agent it can hand off to whose
model, function tools and handoffs ask the step context (docs/agents.md):

- each model request: a recorded activity (`llm.request`), metered, asked once per visit, replayed after;
- each function tool call: a recorded activity (`tool.<name>`), or, for a tool declared a side effect, an operation
  of the ledger (`ctx.side_effect`) the tool's body only describes (it returns an `Operation`);
- the tool calls the model asked for together: one `ctx.parallel` group, in the order the model asked;
- each call of a tool declared in `approvals`: `ctx.request_approval` first, and the run waits in the inbox;
  once approved and revalidated the tool runs, with the approval in `approved()`;
- each handoff: a recorded activity (`handoff.<agent>`), so the agent handed to is the same on replay.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import json
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from agents import Agent, FunctionTool, Handoff, RunConfig, Runner, RunResult, handoff
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.run_context import RunContextWrapper
from agents.tool_context import ToolContext

from durable.agents.bridge import Ask, Session, agent_loop
from durable.agents.effects import REFUSED, Effect, SideEffectTool, asked_position, perform, together
from durable.agents.openai_agents.errors import durable_error
from durable.agents.openai_agents.records import (
    MODEL_ACTIVITY,
    Operation,
    as_text,
    handoff_activity,
    model_call,
    operation_of,
    response_of,
    tool_activity,
    tool_answer,
    tool_outcome,
    usage_of,
)
from durable.agents.openai_agents.releases import (
    agents_of,
    handoff_target,
    model_name,
    prompt_release,
    refuse_client_retries,
    tool_catalog_version,
)
from durable.context import Context
from durable.engine.costs import Usage
from durable.engine.errors import NonRetryableError

ContextT = TypeVar("ContextT")
_approved: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("durable_approved", default=None)

# The SDK starts one task per function tool call; each runs its input guardrails before it asks: a group of
# tool calls is taken whole after this many turns of the agent's loop (durable/agents/bridge.py).
OPENAI_SETTLE_TURNS = 12


@dataclass(frozen=True)
class Approval:
    """How a tool that needs a human asks: `ctx.request_approval`'s arguments, from the call's.

    `snapshot(args)` reads the facts the approver sees, fresh, from the call's arguments (as the model gave them,
    after the tool's input guardrails); `approve`, `revalidate`, `expires_in`, `on_invalid`, `on_expiry` and
    `approvers` are as `ctx.request_approval` takes them (docs/approvals.md).
    """

    kind: str
    snapshot: Callable[[dict[str, Any]], dict[str, Any]]
    approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    revalidate: Callable[[dict[str, Any]], Any]
    expires_in: timedelta
    on_invalid: str = "ask_again"
    on_expiry: str = "fail"
    approvers: int | Callable[[dict[str, Any]], int] = 1


def approved() -> dict[str, Any]:
    """In a tool that needed approval: exactly what the human approved (the `approve` object), revalidated."""
    granted = _approved.get()
    if granted is None:
        raise NonRetryableError("this tool acts only on an approval durable asked for, and none was given",
                                kind="approval_not_declared")
    return dict(granted)


class DurableAgent(Generic[ContextT]):
    """An OpenAI Agents SDK agent run durably inside workflow steps (docs/agents.md).

    `side_effects` names the function tools whose calls are ledger operations, `approvals` the tools a human
    approves first (a tool created with `needs_approval` must have one). `prompt_release` and
    `tool_catalog_version` are what a workflow running the agent declares and pins. `limit` names the limit
    (DURABLE_LIMITS) each model request takes room in. `model_provider` resolves a model given by name (the SDK's
    default provider otherwise).
    """

    def __init__(self, agent: Agent[ContextT], *, name: str | None = None,
                 side_effects: Mapping[str, SideEffectTool] | None = None,
                 approvals: Mapping[str, Approval] | None = None, limit: str | None = None,
                 model_provider: ModelProvider | None = None) -> None:
        self.agent = agent
        self.name = name or agent.name
        self.side_effects = dict(side_effects or {})
        self.approvals = dict(approvals or {})
        self.limit = limit
        self.model_provider = model_provider
        refuse_client_retries(agent)
        _refuse_repeated_names(agent)
        _refuse_undeclared_approvals(agent, self.approvals)
        self.prompt_release = prompt_release(self.name, agent)
        self.tool_catalog_version = tool_catalog_version(self.name, agent, self.side_effects, self.approvals)

    def run(self, ctx: Context, input: str | list[Any], *, context: ContextT | None = None,
            run_config: RunConfig | None = None, **options: Any) -> RunResult:
        """Run the agent as `Runner.run(agent, input, context=..., ...)` would, from a step, `ctx` its context.

        Call it on the step's own thread. A visit that runs again runs the agent again from its start: what it
        recorded is replayed, and it goes on live from where it stopped. Tracing to OpenAI is off unless
        `run_config` turns it on. Errors end the step as durable's retry policy reads them.
        """
        config = run_config or RunConfig(tracing_disabled=True)
        if config.model is not None:
            raise NonRetryableError("DurableAgent.run takes no RunConfig(model=...): a run is pinned to its agents' "
                                    "own models", kind="invalid_request")
        session = Session(agent_loop(), settle_turns=OPENAI_SETTLE_TURNS)
        graph = _Graph(self, session, self.model_provider or config.model_provider)
        run = Runner.run(graph.copy_of(self.agent), input, context=context, run_config=config, **options)
        try:
            return session.serve(run, _Visit(self, ctx, session, graph).handle)
        except Exception as exc:
            error = durable_error(exc)
            if error is exc:
                raise
            raise error from exc


def _refuse_repeated_names(agent: Agent[Any]) -> None:
    """A handoff is recorded by the name of the agent handed to: two agents of one name would be one on replay."""
    names = [each.name for each in agents_of(agent)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"agents reachable from {agent.name!r} share the names {repeated}: give each its own name, "
                         "as a handoff is recorded by the name of the agent it hands to")


def _refuse_undeclared_approvals(agent: Agent[Any], approvals: Mapping[str, Approval]) -> None:
    for each in agents_of(agent):
        for tool in each.tools:
            if isinstance(tool, FunctionTool) and tool.needs_approval and tool.name not in approvals:
                raise ValueError(f"tool {tool.name!r} needs approval, and DurableAgent was not told how to ask: add "
                                 f"approvals={{{tool.name!r}: Approval(...)}}")


# -- what the agent runs with: copies whose model, tools and handoffs ask the step ------------------------------

class _Graph:
    """Copies of the agent and of every agent it can hand off to, made for one run, by name."""

    def __init__(self, durable_agent: DurableAgent[Any], session: Session, provider: ModelProvider) -> None:
        self.durable_agent = durable_agent
        self.session = session
        self.provider = provider
        originals = list(agents_of(durable_agent.agent))
        self.copies: dict[str, Agent[Any]] = {a.name: a.clone() for a in originals}
        for original in originals:
            copy = self.copies[original.name]
            copy.model = _RecordedModel(functools.partial(self._model_of, original), session)
            copy.tools = [self._tool(tool) for tool in original.tools]
            copy.handoffs = [self._handoff(item) for item in original.handoffs]

    def copy_of(self, agent: Agent[Any]) -> Agent[Any]:
        return self.copies[agent.name]

    def _model_of(self, agent: Agent[Any]) -> Model:
        return agent.model if isinstance(agent.model, Model) else self.provider.get_model(agent.model)

    def _tool(self, tool: Any) -> Any:
        if not isinstance(tool, FunctionTool):
            return tool  # hosted tools run at the provider, inside the recorded model request
        needs_human = tool.name in self.durable_agent.approvals

        async def invoke(tool_ctx: ToolContext[Any], input_json: str) -> Any:
            return await self.session.ask("tool", (tool, tool_ctx, input_json, needs_human),
                                          tool_call_id=tool_ctx.tool_call_id)

        return dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=False)

    def _handoff(self, item: Agent[Any] | Handoff[Any, Any]) -> Handoff[Any, Any]:
        original = item if isinstance(item, Handoff) else handoff(item)
        target = handoff_target(item)

        async def invoke(run_ctx: RunContextWrapper[Any], input_json: str) -> Agent[Any]:
            name: str = await self.session.ask("handoff", (original, run_ctx, input_json))
            return self.copies[name]

        copied = dataclasses.replace(original, on_invoke_handoff=invoke)
        if target is not None:
            copied._agent_ref = weakref.ref(self.copies[target.name])
        return copied


class _RecordedModel(Model):
    """An agent's model, each request made by the step as a recorded activity."""

    def __init__(self, resolve: Callable[[], Model], session: Session) -> None:
        self.resolve = resolve
        self.session = session

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response: ModelResponse = await self.session.ask("model", (self, args, kwargs))
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NonRetryableError("DurableAgent runs the agent with Runner.run: a streamed response is not recorded",
                                kind="invalid_request")


# -- the step's side of one run -----------------------------------------------------------------------------------

class _Visit:
    """Each thing the agent asks for, made through the step context."""

    def __init__(self, durable_agent: DurableAgent[Any], ctx: Context, session: Session, graph: _Graph) -> None:
        self.agent = durable_agent
        self.ctx = ctx
        self.loop = session.loop
        self.graph = graph
        self.asked_order: list[str] = []  # the call ids of the newest response's tool calls, in the order asked

    def handle(self, asks: list[Ask]) -> None:
        """Answer a group of asks: model requests, then the tool calls queued together, then a handoff."""
        for ask in asks:
            if ask.kind == "model":
                self._model_request(ask)
        tools = sorted((ask for ask in asks if ask.kind == "tool"), key=self._asked_position)
        if tools:
            self._tool_calls(tools)
        for ask in asks:
            if ask.kind == "handoff":
                self._handoff(ask)

    def _asked_position(self, ask: Ask) -> int:
        return asked_position(self.asked_order, ask)

    def _model_request(self, ask: Ask) -> None:
        # A model call: its usage is recorded, priced and counted against the run's budget (checked before it).
        record = self.ctx.activity(MODEL_ACTIVITY, self._request, ask, usage=_usage, limit=self.agent.limit)
        response = response_of(record)
        self.asked_order = [str(getattr(item, "call_id", "")) for item in response.output
                            if getattr(item, "type", None) == "function_call"]
        ask.give(response)

    def _request(self, ask: Ask) -> dict[str, Any]:
        recorded, args, kwargs = ask.payload
        model = recorded.resolve()
        response: ModelResponse = self.loop.call(lambda: model.get_response(*args, **kwargs), ask.context())
        return model_call(model_name(model), response)  # metered under the name the model goes by now

    # -- tool calls ----------------------------------------------------------------------------------------------

    def _tool_calls(self, asks: list[Ask]) -> None:
        """The calls asked for together: approvals first, then their bodies at once, then their side effects."""
        runnable: list[tuple[Ask, dict[str, Any] | None]] = []
        for ask in asks:
            granted, refusal = self._approval(ask)
            if refusal is not None:
                ask.give(refusal)
            else:
                runnable.append((ask, granted))
        if not runnable:
            return
        outcomes = self._together([(tool_activity(ask.payload[0].name), self._body(ask, granted))
                                   for ask, granted in runnable])
        effects: list[tuple[Ask, SideEffectTool, Operation]] = []
        for (ask, _), outcome in zip(runnable, outcomes, strict=True):
            name = ask.payload[0].name
            declared = self.agent.side_effects.get(name)
            operation = operation_of(outcome)
            if declared is not None and operation is not None:
                effects.append((ask, declared, operation))
            elif operation is not None:
                raise NonRetryableError(f"tool {name!r} returned an Operation but is not declared a side effect: "
                                        f"add it to DurableAgent(side_effects={{{name!r}: SideEffectTool(...)}})",
                                        kind="undeclared_side_effect")
            elif declared is not None and not isinstance(outcome.get("return"), str):
                raise NonRetryableError(f"side-effect tool {name!r} must return an Operation(business_key=..., "
                                        "payload=...) for durable to perform, or a text answering the model",
                                        kind="undeclared_side_effect")
            else:
                ask.give(tool_answer(outcome))
        if effects:
            self._perform(effects)

    def _approval(self, ask: Ask) -> tuple[dict[str, Any] | None, str | None]:
        """(what was approved, None), or (None, the answer the model gets for a rejected call)."""
        tool, _, input_json, needs_human = ask.payload
        if not needs_human:
            return None, None
        declared = self.agent.approvals[tool.name]
        args = json.loads(input_json or "{}")
        try:
            granted = self.ctx.request_approval(
                declared.kind, snapshot=functools.partial(declared.snapshot, args), approve=declared.approve,
                revalidate=declared.revalidate, expires_in=declared.expires_in, on_invalid=declared.on_invalid,
                on_expiry=declared.on_expiry, approvers=declared.approvers)
        except NonRetryableError as refused:
            if refused.kind != "approval_rejected":
                raise
            return None, f"a human rejected this call: {refused}"
        return dict(granted["object"]) if "object" in granted else dict(granted), None

    def _body(self, ask: Ask, granted: dict[str, Any] | None) -> Callable[[], dict[str, Any]]:
        tool, tool_ctx, input_json, _ = ask.payload
        context = ask.context()
        context.run(_approved.set, granted)
        return lambda: self.loop.call(lambda: tool_outcome(tool.on_invoke_tool(tool_ctx, input_json)), context)

    def _together(self, calls: list[tuple[str, Callable[[], dict[str, Any]]]]) -> list[dict[str, Any]]:
        return together(self.ctx, calls)

    def _perform(self, effects: list[Effect]) -> None:
        perform(self.ctx, effects, lambda ask, result: ask.give(as_text(result)),
                lambda ask, conflict: ask.give(REFUSED.format(conflict=conflict)))


    # -- handoffs ------------------------------------------------------------------------------------------------

    def _handoff(self, ask: Ask) -> None:
        """A handoff's callback runs once; the agent handed to is recorded, so a replay hands to the same one."""
        original, run_ctx, input_json = ask.payload

        def invoke() -> dict[str, Any]:
            target = self.loop.call(lambda: original.on_invoke_handoff(run_ctx, input_json), ask.context())
            return {"agent": target.name}

        record = self.ctx.activity(handoff_activity(original.agent_name), invoke)
        ask.give(record["agent"])


def _usage(record: dict[str, Any]) -> Usage | None:
    """What a model request used, as durable meters it."""
    used = usage_of(record)
    return Usage(**used) if used.get("model") else None
