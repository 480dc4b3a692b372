"""DurableAgent: an existing Pydantic AI agent, run inside a workflow step so that a crash, a retry or a wait for a
human never asks its model again for what it answered, nor does a side effect twice.

`DurableAgent(agent, side_effects=..., approvals=...).run(ctx, prompt, deps=...)` runs the agent as `agent.run`
would, with a capability that routes, through the step context (docs/agents.md):

- each model request: a recorded activity (`llm.request`), asked once per visit, replayed after;
- each tool call: a recorded activity (`tool.<name>`), or, for a tool declared a side effect, an operation of the
  ledger (`ctx.side_effect`) the tool's body only describes (it returns an `Operation`);
- the tool calls the model asked for together: one `ctx.parallel` group, in the order the model asked;
- each call of a tool that requires approval (`requires_approval=True`): `ctx.request_approval`, and the run waits
  in the inbox; once approved and revalidated the tool runs, with the approval in `approved(ctx)`.
"""
from __future__ import annotations

import functools
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from pydantic_ai import Agent, AgentRunResult, ModelRetry, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.durable_exec import conversation_id_from_run_id
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from durable.agents.bridge import Ask, Session, agent_loop
from durable.agents.effects import REFUSED, Effect, SideEffectTool, asked_position, perform, together
from durable.agents.pydantic_ai.errors import durable_error
from durable.agents.pydantic_ai.records import (
    MODEL_ACTIVITY,
    Operation,
    model_call,
    operation_of,
    response_of,
    tool_activity,
    tool_answer,
    tool_outcome,
    usage_of,
)
from durable.agents.pydantic_ai.releases import prompt_release, refuse_client_retries, tool_catalog_version
from durable.agents.pydantic_ai.streaming import streamed_request
from durable.context import Context
from durable.engine.costs import Usage
from durable.engine.errors import ApprovalPreconditionFailed, ApprovalRejected, NonRetryableError

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")
APPROVAL = "durable_approval"  # where an approved call's RunContext.tool_call_metadata holds its approval


@dataclass(frozen=True)
class Approval:
    """How a tool that requires approval asks a human: `ctx.request_approval`'s arguments, from the call's.

    `snapshot(args)` reads the facts the approver sees, fresh, from the call's validated arguments; `approve`,
    `revalidate`, `expires_in`, `on_invalid`, `on_expiry` and `approvers` are as `ctx.request_approval` takes
    them (docs/approvals.md).
    """

    kind: str
    snapshot: Callable[[dict[str, Any]], dict[str, Any]]
    approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    revalidate: Callable[[dict[str, Any]], Any]
    expires_in: timedelta
    on_invalid: str = "ask_again"
    on_expiry: str = "fail"
    approvers: int | Callable[[dict[str, Any]], int] = 1


def approved(ctx: RunContext[Any]) -> dict[str, Any]:
    """In a tool that required approval: exactly what the human approved (the `approve` object), revalidated."""
    granted = ctx.tool_call_metadata.get(APPROVAL) if isinstance(ctx.tool_call_metadata, dict) else None
    if not ctx.tool_call_approved or granted is None:
        raise ToolFailed("this tool acts only on an approval durable asked for, and none was given")
    return dict(granted["object"])


class DurableAgent(Generic[DepsT, OutputT]):
    """A Pydantic AI agent run durably inside workflow steps (docs/agents.md).

    `side_effects` names the tools whose calls are ledger operations, `approvals` how each tool that requires
    approval asks a human. `prompt_release` and `tool_catalog_version` are what a workflow running the agent
    declares and pins, so a run paused under one prompt or tool set is not resumed under another. `limit` names the
    limit (DURABLE_LIMITS, `durable.limit`) each model request takes room in, across every worker.
    """

    def __init__(self, agent: Agent[DepsT, OutputT], *, name: str | None = None,
                 side_effects: Mapping[str, SideEffectTool] | None = None,
                 approvals: Mapping[str, Approval] | None = None, limit: str | None = None) -> None:
        self.agent = agent
        self.limit = limit
        self.name = name or agent.name or "agent"
        self.side_effects = dict(side_effects or {})
        self.approvals = dict(approvals or {})
        refuse_client_retries(agent.model)
        self.prompt_release = prompt_release(self.name, agent)
        self.tool_catalog_version = tool_catalog_version(self.name, agent, self.side_effects, self.approvals)

    def run(self, ctx: Context, user_prompt: str | Sequence[Any] | None = None, *, deps: Any = None,
            message_history: Sequence[ModelMessage] | None = None, stream: bool = False,
            **options: Any) -> AgentRunResult[OutputT]:
        """Run the agent as `agent.run(user_prompt, deps=..., ...)` would, from a step, with `ctx` its context.

        Call it on the step's own thread. A visit that runs again (after a crash, a retry, a decision) runs the
        agent again from its start: what it recorded is replayed, and it goes on live from where it stopped.
        Errors end the step as durable's retry policy reads them (docs/agents.md, "Retries"). `stream=True`
        publishes the model's text on the run's stream as it comes (`ctx.stream`, durable/agents/pydantic_ai/
        streaming.py); what is recorded is the same.
        """
        if "model" in options or "event_stream_handler" in options:
            raise NonRetryableError("DurableAgent.run takes no model= or event_stream_handler=: a run is pinned to "
                                    "the agent's own model, and a streamed response is not recorded",
                                    kind="invalid_request")
        session = Session(agent_loop())
        visit = _Visit(self, ctx, session)
        visit.stream = stream
        run = self.agent.run(user_prompt, deps=deps, message_history=message_history,
                             capabilities=[_Durability(session=session, run_id=visit.run_id)], **options)
        try:
            return session.serve(run, visit.handle)
        except Exception as exc:
            error = durable_error(exc)
            if error is exc:
                raise
            raise error from exc


_runs_in_visit: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class _Visit:
    """The step's side of one agent run: each thing the agent asks for, made through the step context."""

    def __init__(self, durable_agent: DurableAgent[Any, Any], ctx: Context, session: Session) -> None:
        self.agent = durable_agent
        self.ctx = ctx
        self.loop = session.loop
        # The n-th agent run of this visit has the same run id on every execution of the visit: its messages are
        # the same when replayed (Pydantic AI would draw a new one each time).
        number = _runs_in_visit.get(ctx, 0)
        _runs_in_visit[ctx] = number + 1
        self.run_id = str(uuid.uuid5(uuid.UUID(str(ctx.run_id)), f"{ctx.step}:{ctx.visit}:{number}"))
        self.asked_order: list[str] = []  # the tool call ids of the newest response, in the order asked
        self.stream = False  # the model's text published on the run's stream as it comes

    def handle(self, asks: list[Ask]) -> None:
        """Answer a group of asks: tool calls queued together at once, anything else on its own, in order."""
        tools = sorted((ask for ask in asks if ask.kind == "tool"), key=self._asked_position)
        for ask in asks:
            if ask.kind == "model":
                self._model_request(ask)
            elif ask.kind == "approvals":
                self._approvals(ask)
        if tools:
            self._tool_calls(tools)

    def _asked_position(self, ask: Ask) -> int:
        return asked_position(self.asked_order, ask)

    # -- model requests ------------------------------------------------------------------------------------------

    def _model_request(self, ask: Ask) -> None:
        # A model call: its usage is recorded, priced and counted against the run's budget (checked before it).
        record = self.ctx.activity(MODEL_ACTIVITY, self._request, ask, usage=_usage, limit=self.agent.limit)
        response = response_of(record)
        self.asked_order = [part.tool_call_id for part in response.parts if isinstance(part, ToolCallPart)]
        ask.give(response)

    def _request(self, ask: Ask) -> dict[str, Any]:
        model, messages, settings, parameters = ask.payload
        request: Callable[[], Awaitable[ModelResponse]] = (
            (lambda: streamed_request(model, messages, settings, parameters, self.ctx.stream)) if self.stream
            else (lambda: model.request(messages, settings, parameters)))
        response = self.loop.call(request, ask.context())
        return model_call(messages, response)

    # -- tool calls ----------------------------------------------------------------------------------------------

    def _tool_calls(self, asks: list[Ask]) -> None:
        """The calls the model asked for together: their bodies at once, then the side effects they describe."""
        outcomes = self._together([(tool_activity(ask.payload[1]), self._body(ask)) for ask in asks])
        effects: list[tuple[Ask, SideEffectTool, Operation]] = []
        for ask, outcome in zip(asks, outcomes, strict=True):
            name = ask.payload[1]
            declared = self.agent.side_effects.get(name)
            operation = operation_of(outcome)
            if declared is not None and operation is not None:
                effects.append((ask, declared, operation))
            elif declared is None and operation is not None:
                raise NonRetryableError(f"tool {name!r} returned an Operation but is not declared a side effect: "
                                        f"add it to DurableAgent(side_effects={{{name!r}: SideEffectTool(...)}})",
                                        kind="undeclared_side_effect")
            elif declared is not None and not outcome.keys() & {"retry", "failed"}:
                raise NonRetryableError(f"side-effect tool {name!r} must return an Operation(business_key=..., "
                                        "payload=...) for durable to perform, or answer the model (ModelRetry, "
                                        "ToolFailed)", kind="undeclared_side_effect")
            else:
                self._answer(ask, outcome)
        if effects:
            self._perform(effects)

    def _body(self, ask: Ask) -> Callable[[], dict[str, Any]]:
        toolset, name, args, run_ctx, tool = ask.payload
        return lambda: self.loop.call(lambda: tool_outcome(toolset.call_tool(name, args, run_ctx, tool)),
                                      ask.context())

    def _together(self, calls: list[tuple[str, Callable[[], dict[str, Any]]]]) -> list[dict[str, Any]]:
        return together(self.ctx, calls)

    def _perform(self, effects: list[Effect]) -> None:
        perform(self.ctx, effects, lambda ask, result: ask.give(result),
                lambda ask, conflict: ask.refuse(ToolFailed(REFUSED.format(conflict=conflict))))


    @staticmethod
    def _answer(ask: Ask, outcome: dict[str, Any]) -> None:
        try:
            value = tool_answer(outcome)
        except (ModelRetry, ToolFailed) as answered:  # the tool answered the model with it: the model's to read
            ask.refuse(answered)
        else:
            ask.give(value)

    # -- approvals -----------------------------------------------------------------------------------------------

    def _approvals(self, ask: Ask) -> None:
        """Ask a human for each call that requires approval, in turn; the run waits in the inbox meanwhile."""
        requests: DeferredToolRequests = ask.payload
        approvals: dict[str, ToolApproved | ToolDenied] = {}
        metadata: dict[str, dict[str, Any]] = {}
        for call in requests.approvals:
            declared = self.agent.approvals.get(call.tool_name)
            if declared is None:
                raise NonRetryableError(f"tool {call.tool_name!r} requires approval, and DurableAgent was not told "
                                        f"how to ask: add approvals={{{call.tool_name!r}: Approval(...)}}",
                                        kind="approval_not_declared")
            args = requests.validated_args.get(call.tool_call_id) or call.args_as_dict()
            try:
                granted = self.ctx.request_approval(
                    declared.kind, snapshot=functools.partial(declared.snapshot, args), approve=declared.approve,
                    revalidate=declared.revalidate, expires_in=declared.expires_in, on_invalid=declared.on_invalid,
                    on_expiry=declared.on_expiry, approvers=declared.approvers)
            except ApprovalRejected as refused:
                approvals[call.tool_call_id] = ToolDenied(f"a human rejected this call: {refused}")
                continue
            except ApprovalPreconditionFailed as refused:  # nobody was asked: the facts fail already
                approvals[call.tool_call_id] = ToolDenied(f"this call cannot be approved now: {refused}")
                continue
            approvals[call.tool_call_id] = ToolApproved()
            metadata[call.tool_call_id] = {APPROVAL: granted}
        ask.give(DeferredToolResults(approvals=dict(approvals), metadata=metadata))


# -- what the agent runs with: a capability that routes its requests and tool calls to the session -------------

@dataclass
class _Durability(AbstractCapability[Any]):
    """Added to each run of the agent: its model and tools ask the step; its run id is the same on every replay."""

    session: Session | None = None
    run_id: str = ""

    def get_default_run_id(self) -> str | None:
        return self.run_id

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id)

    def get_wrapper_model(self, model: Model) -> Model | None:
        return _RecordedModel(model, self._session)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _RecordedToolset(toolset, session=self._session)

    async def handle_deferred_tool_calls(self, ctx: RunContext[Any], *,
                                         requests: DeferredToolRequests) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # external calls are the caller's: the run ends on them as it would without durable
        results: DeferredToolResults = await self._session.ask("approvals", requests)
        return results

    @property
    def _session(self) -> Session:
        assert self.session is not None  # DurableAgent.run always gives one
        return self.session


class _RecordedModel(WrapperModel):
    """The agent's model, each request made by the step as a recorded activity."""

    def __init__(self, wrapped: Model, session: Session) -> None:
        super().__init__(wrapped)
        self.session = session

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        response: ModelResponse = await self.session.ask(
            "model", (self.wrapped, messages, model_settings, model_request_parameters))
        return response


@dataclass
class _RecordedToolset(WrapperToolset[Any]):
    """The agent's tools, each call made by the step as a recorded activity or a ledger operation."""

    session: Session | None = None

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        assert self.session is not None  # _Durability always gives one
        return await self.session.ask("tool", (self.wrapped, name, tool_args, ctx, tool),
                                      tool_call_id=ctx.tool_call_id)


def _usage(record: dict[str, Any]) -> Usage | None:
    """What a model request used, as durable meters it (None: the model named no model)."""
    used = usage_of(record)
    return Usage(**used) if used.get("model") else None
