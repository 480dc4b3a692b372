"""Two versions of one workflow, and builders for deploys that changed a version in place."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable import OnActiveBusinessKey, Workflow, register
from durable.workflow import Migration

NAME = "test-versioned"


class In(BaseModel):
    order_id: str = "ORD-1"


class StateV1(In):
    done: list[str] = []


class StateV2(StateV1):
    risk: str


def _mark(name: str):
    def step(ctx: Any, state: BaseModel) -> BaseModel:
        state.done.append(name)
        return state
    return step


def build(version: int = 1, steps: tuple[str, ...] = ("a", "b", "c"), *, state: type[BaseModel] = StateV1,
          side_effects: dict[str, tuple[str, ...]] | None = None, **options: Any) -> Workflow:
    release = options.pop("prompt_release_override", "prompts-1")
    options.setdefault("on_active_business_key", OnActiveBusinessKey.START_ANOTHER)  # tests reuse business keys
    wf = Workflow(name=NAME, version=version, state=state, input=In, prompt_release=release, **options)
    for name in steps:
        wf.step(_mark(name), name=name, side_effects=(side_effects or {}).get(name, ()))
    return wf


v1 = register(build(1))
v2 = register(build(2, ("a", "risk", "b", "c"), state=StateV2, migrations=[
    Migration(from_version=1, step_map={"a": "a", "b": "risk"}, upcast=lambda s: {**s, "risk": "unassessed"}),
]))
