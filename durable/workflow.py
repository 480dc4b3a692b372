"""The workflow API agent developers write against: a name, a version, steps and their routes, a state model."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from durable.context import Context
from durable.engine.active_runs import OnActiveBusinessKey
from durable.engine.contract import PINNABLE, Contract, Upcaster
from durable.engine.costs import Budget
from durable.engine.fingerprint import StepShape, topology_fingerprint
from durable.engine.graph import Graph, Route
from durable.engine.retry import RetryPolicy
from durable.engine.schedules import Scheduled
from durable.engine.topology import shapes_to_json

# (ctx, state) -> the new state, or None when it mutated the one given, or the route it takes (`wf.goto`,
# `wf.finish`). The context is a `durable.Context`; the state is the workflow's own model: Any here, so that a
# step annotated with it (`state: ClaimState`) is accepted as it is.
StepFn = Callable[[Context, Any], BaseModel | Route | None]
# The decorators return what they were given, so a step keeps its own signature for its callers.
StepFnT = TypeVar("StepFnT", bound=StepFn)
InitialStateT = TypeVar("InitialStateT", bound=Callable[[Any], BaseModel])
OutputT = TypeVar("OutputT", bound=Callable[[Any], Any])


@dataclass(frozen=True)
class Step:
    name: str
    fn: StepFn
    side_effects: tuple[str, ...] = ()
    retry: RetryPolicy | None = None
    routes: tuple[str, ...] = ()  # the steps it may go to next; empty: the next declared step (or the end)


@dataclass(frozen=True)
class Migration:
    """How a newer version takes over runs of an older one: where each old position goes, and
    how the old state becomes the new one. Applied only by an operator, and audited."""

    from_version: int
    step_map: dict[str, str]
    upcast: Callable[[dict[str, Any]], dict[str, Any]] = lambda state: state


@dataclass
class Workflow:
    """A versioned workflow: a graph of steps. A step without routes goes to the next declared step.

    Each step receives the step context and the current state, and returns the new state
    (or mutates and returns None), or the route it takes: `wf.goto("act", state)`, `wf.finish(state)`.
    The state and the route taken are checkpointed after every step.
    """

    name: str
    version: int
    state: type[BaseModel]
    input: type[BaseModel]
    checkpoint_schema_version: int = 1
    tool_catalog_version: str = ""
    prompt_release: str = ""
    model_policy_version: str = ""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pinned: tuple[str, ...] = ()  # of PINNABLE: releases that must not change under a paused run
    upcasters: dict[int, Upcaster] = field(default_factory=dict)  # checkpoint schema v -> v+1
    migrations: list[Migration] = field(default_factory=list)
    # A start whose business key already has an active run of this workflow: see OnActiveBusinessKey.
    on_active_business_key: OnActiveBusinessKey = OnActiveBusinessKey.RETURN_EXISTING
    # Input fields the console's search box finds runs by, besides the business key: e.g. ("customer_email",).
    searchable: tuple[str, ...] = ()
    # The most step visits a run may make (its step budget); None: DURABLE_MAX_STEP_VISITS.
    max_visits: int | None = None
    # Event name -> the pydantic model its payload must match (checked when it is sent: 400 naming the field), or
    # None for any JSON. A workflow that declares events takes only those names (any other is a 400 naming them).
    events: dict[str, type[BaseModel] | None] = field(default_factory=dict)
    # The most a run may spend on model calls (tokens, money or both); None: no limit. A run keeps the budget it
    # started with; an operator may raise it (docs/workflows.md, "Model calls and budgets").
    budget: Budget | None = None
    # Fire times that start runs of this workflow (docs/workflows.md, "Schedules"): each a cron expression in a time
    # zone, written to the database by the sweeper of a worker that loaded this code.
    schedules: tuple[Scheduled, ...] | list[Scheduled] = ()
    steps: list[Step] = field(default_factory=list)
    _initial_state: Callable[[Any], BaseModel] | None = None
    _output: Callable[[Any], Any] | None = None
    # The graph and the steps by name, built again only when a step was declared since.
    _built: tuple[int, Graph, dict[str, Step]] | None = field(default=None, repr=False, compare=False)

    @overload
    def step(self, fn: StepFnT, *, name: str | None = None, side_effects: tuple[str, ...] | list[str] = (),
             retry: RetryPolicy | None = None, next: tuple[str, ...] | list[str] | str = ()) -> StepFnT: ...

    @overload
    def step(self, fn: None = None, *, name: str | None = None, side_effects: tuple[str, ...] | list[str] = (),
             retry: RetryPolicy | None = None,
             next: tuple[str, ...] | list[str] | str = ()) -> Callable[[StepFnT], StepFnT]: ...

    def step(self, fn: StepFn | None = None, *, name: str | None = None,
             side_effects: tuple[str, ...] | list[str] = (), retry: RetryPolicy | None = None,
             next: tuple[str, ...] | list[str] | str = ()) -> Any:  # noqa: A002 (the word authors read)
        """Declare a step: `@wf.step`, `@wf.step(side_effects=["refund"], retry=RetryPolicy(...))`, or
        `@wf.step(next=["act", "answer"])` for a step that chooses where the run goes (`wf.goto`)."""

        def register(f: StepFnT) -> StepFnT:
            step_name = name or f.__name__
            if any(s.name == step_name for s in self.steps):
                raise ValueError(f"workflow {self.name} v{self.version} already has a step {step_name!r}")
            routes = (next,) if isinstance(next, str) else tuple(next)
            self.steps.append(Step(step_name, f, tuple(side_effects), retry, routes))
            return f

        return register(fn) if fn is not None else register

    @staticmethod
    def goto(step: str, state: BaseModel | None = None) -> Route:
        """What a step returns to go to `step` next (one of the routes it declares), with `state` (None: the
        state it mutated)."""
        return Route(step, state)

    @staticmethod
    def finish(state: BaseModel | None = None) -> Route:
        """What a step returns to end the run now, from any step."""
        return Route(None, state)

    def initial_state(self, fn: InitialStateT) -> InitialStateT:
        """Declare how the first state is built from the validated input."""
        self._initial_state = fn
        return fn

    def output(self, fn: OutputT) -> OutputT:
        """Declare the run's output, computed from the final state."""
        self._output = fn
        return fn

    def __post_init__(self) -> None:
        self.on_active_business_key = OnActiveBusinessKey(self.on_active_business_key)  # a plain string is fine too
        unknown = set(self.pinned) - set(PINNABLE)
        if unknown:
            raise ValueError(f"pinned must name among {', '.join(PINNABLE)}; got {', '.join(sorted(unknown))}")
        self.searchable = tuple(self.searchable)
        missing = [name for name in self.searchable if name not in self.input.model_fields]
        if missing:
            raise ValueError(f"searchable names fields of the input model {self.input.__name__}; "
                             f"it has no {', '.join(missing)}")
        if self.max_visits is not None and (isinstance(self.max_visits, bool) or not isinstance(self.max_visits, int)
                                            or self.max_visits < 1):
            raise ValueError(f"max_visits must be a whole number of at least 1, not {self.max_visits!r}")
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise ValueError(f"budget must be a durable.Budget(tokens=..., cost=...), not {self.budget!r}")

    # What the executor asks of a workflow.

    @property
    def topology(self) -> tuple[StepShape, ...]:
        return tuple(StepShape(s.name, s.side_effects, s.routes) for s in self.steps)

    @property
    def graph(self) -> Graph:
        """The steps and their routes, checked (ValueError for a route naming no step)."""
        return self._build()[1]

    def _build(self) -> tuple[int, Graph, dict[str, Step]]:
        if self._built is None or self._built[0] != len(self.steps):
            try:
                self._built = (len(self.steps), Graph(self.topology), {s.name: s for s in self.steps})
            except ValueError as exc:
                raise ValueError(f"workflow {self.name} v{self.version}: {exc}") from None
        return self._built

    def validate(self) -> None:
        """Refuse, with a ValueError, a graph whose routes name no step or a migration mapping to no step."""
        self.graph  # noqa: B018 (building it checks it)
        names = {s.name for s in self.steps}
        for migration in self.migrations:
            unknown = sorted(set(migration.step_map.values()) - names)
            if unknown:
                raise ValueError(f"workflow {self.name} v{self.version}: the migration from "
                                 f"v{migration.from_version} maps to {', '.join(map(repr, unknown))}, "
                                 f"not a step of this version")

    def undeclared_events(self, names: Iterable[str]) -> list[str]:
        """Which of `names` this workflow does not take: none when it declares no events (it takes any name)."""
        return [name for name in names if self.events and name not in self.events]

    def step_budget(self, default: int) -> int:
        """The most step visits a run of this workflow may make: its own max_visits, else `default`."""
        return self.max_visits if self.max_visits is not None else default

    def budget_fields(self) -> dict[str, Any]:
        """What a new run records of the budget (its own from then on: raised by an operator, never by a deploy)."""
        budget = self.budget
        return {"budget_tokens": budget.tokens if budget else None, "budget_cost": budget.cost if budget else None}

    def as_contract(self) -> Contract:
        return Contract(self.name, self.version, self.fingerprint, self.topology,
                        {name: getattr(self, name) for name in PINNABLE})

    def migration_from(self, version: int) -> Migration | None:
        return next((m for m in self.migrations if m.from_version == version), None)

    @property
    def fingerprint(self) -> str:
        return topology_fingerprint(self.topology)

    @property
    def first_step(self) -> str:
        if not self.steps:
            raise ValueError(f"workflow {self.name} v{self.version} has no steps")
        return self.steps[0].name

    def get_step(self, name: str) -> Step:
        try:
            return self._build()[2][name]
        except KeyError:
            raise KeyError(f"workflow {self.name} v{self.version} has no step {name!r}") from None

    def next_step(self, name: str) -> str | None:
        """The implicit route: the next declared step, None after the last."""
        return self.graph.implicit_next(name)

    def build_initial_state(self, data: BaseModel) -> BaseModel:
        if self._initial_state is not None:
            return self._initial_state(data)
        return self.state.model_validate(data.model_dump())

    def build_output(self, state: BaseModel) -> Any:
        if self._output is not None:
            return self._output(state)
        return state.model_dump(mode="json")

    def retry_policy_for(self, step: str) -> RetryPolicy:
        return self.get_step(step).retry or self.retry

    def contract(self) -> dict[str, Any]:
        """What a run records at start and is pinned to (a ValueError for a graph that is not one: no run
        starts on it)."""
        self.validate()
        return {
            "workflow_name": self.name,
            "workflow_version": self.version,
            "checkpoint_schema_version": self.checkpoint_schema_version,
            "tool_catalog_version": self.tool_catalog_version,
            "prompt_release": self.prompt_release,
            "model_policy_version": self.model_policy_version,
            "topology_fingerprint": self.fingerprint,
            "topology": shapes_to_json(self.topology),
        }
