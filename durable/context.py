"""`durable.Context`: what a step may ask of durable, the type its `ctx` is annotated with.

A step is `def act(ctx: Context, state: MyState) -> ...`. The worker hands it the runtime's step context
(durable/runtime/context.py), which mypy checks against this Protocol and a test compares with it name for name,
so what a step may call is written here once, for authors, and the machinery under it stays the runtime's. `Call`
and `Effect` are what `ctx.call` and `ctx.effect` build for `ctx.parallel`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, overload
from uuid import UUID

from pydantic import BaseModel

from durable.downstream import Downstream
from durable.engine.costs import UsageOf
from durable.engine.waits import ChildRun, Event

T = TypeVar("T", bound=BaseModel)  # what `returns=` names: a pydantic model


@dataclass(frozen=True)
class Call:
    """An activity for ctx.parallel, made by `ctx.call(name, fn, *args, returns=..., usage=..., limit=..., **kwargs)`."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    returns: type | None = None
    usage: UsageOf | None = None  # a model call's: what its answer says it used
    limit: str | None = None  # the named limit it takes room in (docs/workflows.md, "Limits and priority")


@dataclass(frozen=True)
class Effect:
    """A side effect for ctx.parallel, made by `ctx.effect(action, business_key=..., downstream=..., payload=...)`."""

    action: str
    business_key: str
    downstream: Downstream
    payload: dict[str, Any]



class Context(Protocol):
    """One visit of a step: what its code may ask of durable, on the thread that runs the step.

    Every call is numbered in the order the step's thread makes it and recorded: a visit that runs again (after a
    crash, a retry, a wait, a decision) gets back what it recorded and goes on live from where it stopped.
    """

    @property
    def run_id(self) -> UUID: ...

    @property
    def business_key(self) -> str: ...

    @property
    def workflow_name(self) -> str: ...

    @property
    def workflow_version(self) -> int:
        """The version of the workflow this run is pinned to (docs/workflow-versions.md)."""

    @property
    def step(self) -> str: ...

    @property
    def attempt(self) -> int:
        """The step's attempt, from 1: a retry of the step counts up, a visit after a wait does not."""

    @property
    def visit(self) -> int:
        """The seq of the checkpoint this visit started from (0 for the run's first step)."""

    @property
    def visit_number(self) -> int:
        """Which visit of this step this is, counted from 1 (`act #3`)."""

    @property
    def replayed_calls(self) -> int:
        """How many recorded activity results this visit has reused so far."""

    def patched(self, name: str) -> bool:
        """Whether this visit takes the code patch `name` added (docs/workflow-versions.md, "Patches").

        True for a visit that reaches this point on code that has the patch; False for a visit that ran past this
        point before, on code without it (a run that waited here since before the deploy), so it goes on as it
        began. Answered once per visit and recorded in the journal: the visit run again, and `durable_replay`,
        get the same answer. `if ctx.patched("new-subject"): ... else: ...` keeps both branches until
        `durable_versions` shows no unfinished run depends on the old one.
        """

    @overload
    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T],
                 usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> T: ...

    @overload
    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: None = None,
                 usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Any: ...

    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T] | None = None,
                 usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Any:
        """Run a non-deterministic call (LLM, read) once; on replay return what it returned then.

        The result is recorded as JSON before the step goes on. Pass `returns=SomeModel` to get it back as that
        pydantic model, live and on replay alike. A model call says so with `usage=`, a function of its answer
        returning a `durable.Usage` (or None): what it used is recorded and priced with its result, and the run's
        budget is checked before it is made. `limit="openai"` names a limit (DURABLE_LIMITS or `durable.limit`)
        the call takes room in before it goes out, across every worker; with none soon, the run waits for it,
        parked (docs/workflows.md, "Limits and priority").
        """

    def call(self, name: str, fn: Callable[..., Any], *args: Any, returns: type | None = None,
             usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Call:
        """An activity for `ctx.parallel`: made as `ctx.activity(name, fn, *args, **kwargs)` would make it."""

    def effect(self, action: str, *, business_key: str, downstream: Downstream, payload: dict[str, Any]) -> Effect:
        """A side effect for `ctx.parallel`: performed as `ctx.side_effect(...)` would perform it."""

    def parallel(self, *calls: Call | Effect) -> list[Any]:
        """Make the calls at once (at most DURABLE_PARALLEL_CALLS together); their results in the order given.

        Each call is recorded under its own index, reserved in the order given, so a visit run again reuses what
        finished and calls only the rest. One failure is raised as it is; several as ParallelCallsFailed naming
        each (retryable only if each is). See docs/workflows.md, "Parallel calls".
        """

    def side_effect(self, action: str, *, business_key: str, downstream: Downstream,
                    payload: dict[str, Any]) -> dict[str, Any]:
        """Perform an external action exactly once (the ledger's Prepare -> Execute -> Commit).

        The operation id, sha256("run_id:action:business_key")[:32], is the Idempotency-Key sent to downstreams
        that honour one. Re-entry returns the recorded result. The step declares the action
        (`@wf.step(side_effects=[...])`).
        """

    def request_approval(self, kind: str, *, snapshot: dict[str, Any] | Callable[[], dict[str, Any]],
                         approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                         revalidate: Callable[[dict[str, Any]], Any], expires_in: timedelta,
                         on_invalid: str = "ask_again", on_expiry: str = "fail",
                         approvers: int | Callable[[dict[str, Any]], int] = 1) -> dict[str, Any]:
        """Pause the run until a human decides; return the approval once it still holds.

        `snapshot` (a dict, or a function reading it fresh) is what the approver sees; `approve` is exactly what
        is approved (action, amount, target), or a function of the snapshot. `revalidate(snapshot)` must be a
        module-level function returning a `Revalidation`: it runs when the request is made, when a human decides,
        and right before the run acts. Invalidated or expired requests take `on_invalid`/`on_expiry`: "ask_again"
        or "fail". The step runs again from its start once the decision is in: what it did before the request
        returns what it recorded, so the request may sit anywhere in the step, in a loop too (each visit asks its
        own). No approval raises a `durable.ApprovalNotGranted`: `ApprovalRejected` (a human said no),
        `ApprovalPreconditionFailed` (its facts failed when it was asked: nobody is asked; recorded, so the step
        may catch it and answer with it), `ApprovalExpired` or `ApprovalInvalidated` (with "fail").
        """

    def stream(self, data: Any, *, kind: str | None = None) -> None:
        """Publish `data` (any JSON: a text delta, a progress report) to the run's followers at once.

        Followers read it at `GET /api/runs/{id}/stream/` (Server-Sent Events) and on the console's run page, as an
        event named `kind` (default: `text` for a string, `data` otherwise). It is not recorded for replay: a step run
        again after a crash streams again. Any thread of the step may publish (docs/workflows.md, "Streaming").
        """

    # Waits: the run is parked, released, until the wait ends; the visit then runs again from its start and each
    # wait returns what it recorded. See docs/workflows.md, "Timers, events and child runs".

    def sleep(self, duration: timedelta) -> None:
        """Pause the run for `duration` (from when the visit first got here), by the database's clock."""

    def sleep_until(self, until: datetime) -> None:
        """Pause the run until `until` (an aware datetime), by the database's clock."""

    def wait_for_event(self, names: str | Sequence[str], *, timeout: timedelta | None = None) -> Event | None:
        """The next event named `names` (or one of them) sent to this run, consumed once; None if `timeout` passes
        first. Events sent before the wait began wait in the run's mailbox, in arrival order. Its `payload` is the
        model the workflow declares for its name (`events={"reply": Reply}`), or the JSON sent if it declares none."""

    def start_child(self, workflow: str, *, input: dict[str, Any], business_key: str) -> ChildRun:
        """Start a run of `workflow` as this run's child, once for this visit and key, whatever crashes.

        `durable.ChildKeyTaken` (a `ChildRunFailed`) if the child workflow already has an active run for
        `business_key` that this run did not start: give each child a key of its own, e.g. with the parent's run id
        (docs/workflows.md, "Child business keys")."""

    def wait_child(self, child: ChildRun) -> Any:
        """The child run's output once it has ended; ChildRunFailed if it did not succeed."""

    def wait_children(self, children: Sequence[ChildRun]) -> list[Any]:
        """The outputs of all `children` (in the order given) once every one has ended."""
