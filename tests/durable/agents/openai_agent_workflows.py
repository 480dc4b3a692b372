"""An OpenAI Agents SDK agent that hands off to another, with a scripted model, and the workflow that runs it.

The model answers each agent's turn n with the n-th item of that agent's script: a handoff (the SDK's
`transfer_to_<agent>` tool) or a final text. `HANDED_OFF` counts the handoff callback's calls, `ASKED` the model's.
"""
from __future__ import annotations

from typing import Any

from agents import Agent, ModelResponse, RunContextWrapper, Usage, handoff
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic import BaseModel

from durable import Context, Workflow, register
from durable.agents.openai_agents import DurableAgent

NAME = "test-openai-agent-handoff"
HANDED_OFF: list[str] = []
ASKED: list[str] = []


class Scripted(Model):
    """Each agent's turns, by the agent's name, as the instructions name it."""

    model = "scripted"
    SCRIPTS: dict[str, list[str]] = {"triage": ["transfer_to_refunds"], "refunds": ["Refunds will handle it."]}

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
                           ) -> ModelResponse:
        agent = (system_instructions or "").split(":")[0]
        turn = sum(1 for asked in ASKED if asked == agent)
        ASKED.append(agent)
        answer = self.SCRIPTS[agent][min(turn, len(self.SCRIPTS[agent]) - 1)]
        if answer.startswith("transfer_to_"):
            output: list[Any] = [ResponseFunctionToolCall(id="h1", call_id="h1", name=answer, arguments="{}",
                                                          type="function_call")]
        else:
            output = [ResponseOutputMessage(id="m1", type="message", role="assistant", status="completed", content=[
                ResponseOutputText(type="output_text", text=answer, annotations=[])])]
        return ModelResponse(output=output, usage=Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15),
                             response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def on_handoff(ctx: RunContextWrapper[Any]) -> None:
    HANDED_OFF.append("refunds")  # what a handoff's callback does (tell a queue, page someone) happens once


refunds = Agent(name="refunds", instructions="refunds: settle the customer's refund.", model=Scripted())
triage = Agent(name="triage", instructions="triage: hand the customer to the right agent.", model=Scripted(),
               handoffs=[handoff(refunds, on_handoff=on_handoff)])
LIMIT = "test-agents-model"  # each model request takes room in it (DURABLE_LIMITS, set by the tests)
durable_triage = DurableAgent(triage, limit=LIMIT)


class State(BaseModel):
    message: str
    answer: str = ""
    last_agent: str = ""


handoff_workflow = register(Workflow(name=NAME, version=1, state=State, input=State,
                                     prompt_release=durable_triage.prompt_release,
                                     tool_catalog_version=durable_triage.tool_catalog_version,
                                     pinned=("prompt_release", "tool_catalog_version")))


@handoff_workflow.step()
def converse(ctx: Context, state: State) -> State:
    result = durable_triage.run(ctx, state.message)
    state.answer, state.last_agent = str(result.final_output), result.last_agent.name
    return state
