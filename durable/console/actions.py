"""What an operator may do to a run from the console: cancel, retry now, pause, resume, migrate, raise its budget,
fork it from a checkpoint (offered on each checkpoint of the timeline, not in the actions panel).

Each action goes through the same service the API calls (it checks the state and writes the
audit trail). The statuses here only decide which buttons to offer; the service decides.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durable import budgets, forks, pauses, services, versions
from durable.console.forms import ActionForm, BudgetForm, ForkForm, MigrateForm
from durable.engine.states import TERMINAL, RunStatus
from durable.errors import InvalidInput
from durable.models import Run
from durable.permissions import Caller
from durable.registry import registry

Perform = Callable[[Run, Caller, dict[str, Any]], tuple[Run, str]]  # the run, and what happened


@dataclass(frozen=True)
class RunAction:
    name: str
    label: str
    explain: str  # what happens, shown before the operator confirms
    permission: str
    statuses: frozenset[RunStatus]
    perform: Perform

    @property
    def url_name(self) -> str:
        return f"durable:run-{self.name}"

    def form(self, run: Run, data: Any = None) -> ActionForm:
        if self.name == "migrate":
            return MigrateForm(data, versions=migration_targets(run))
        if self.name == "budget":
            return BudgetForm(data)
        if self.name == "fork":
            return ForkForm(data)
        return ActionForm(data)

    def offered(self, run: Run, user: Caller) -> bool:
        if self.name == "fork":  # on each checkpoint of the timeline ("Fork from here"), not in the panel
            return False
        if self.name == "resume" and run.pause_requested_at is not None:  # a pause asked, not made yet, is forgotten
            return user.has_perm(self.permission) and run.status not in TERMINAL
        if not user.has_perm(self.permission) or run.status not in self.statuses:
            return False
        if self.name == "budget":  # NEEDS_ATTENTION because its budget stopped it, not an UNKNOWN operation
            return budgets.waiting_on_budget(run)
        if self.name == "pause":  # asked already: it pauses at its next step boundary, resume forgets it
            return run.pause_requested_at is None
        return self.name != "migrate" or bool(migration_targets(run))


def migration_targets(run: Run) -> list[int]:
    """Registered versions of the run's workflow that declare a migration from the run's version."""
    return [wf.version for wf in registry.all()
            if wf.name == run.workflow_name and wf.migration_from(run.workflow_version) is not None]


def _steer(service: Callable[..., Run], done: str) -> Perform:
    def perform(run: Run, user: Caller, data: dict[str, Any]) -> tuple[Run, str]:
        return service(run_id=run.id, user=user, source="console", reason=data["reason"]), done
    return perform


def _cancel(run: Run, user: Caller, data: dict[str, Any]) -> tuple[Run, str]:
    """What the cancel found is the message: a refund already paid is named, with its reference."""
    cancellation = services.cancel_run(run_id=run.id, user=user, source="console", reason=data["reason"])
    return cancellation.run, cancellation.summary()


def _migrate(run: Run, user: Caller, data: dict[str, Any]) -> tuple[Run, str]:
    return versions.migrate_run(run_id=run.id, to_version=data["to_version"], user=user, source="console",
                                reason=data["reason"]), "Migrated. The run continues on the new version."


def _raise_budget(run: Run, user: Caller, data: dict[str, Any]) -> tuple[Run, str]:
    run = services.raise_budget(run_id=run.id, user=user, source="console", reason=data["reason"],
                                tokens=data.get("tokens"), cost=data.get("cost"))
    return run, "Budget raised. The run goes on from the step visit it stopped in, and makes the model call it stopped before."


def _fork(run: Run, user: Caller, data: dict[str, Any]) -> tuple[Run, str]:
    """The origin's page says where the fork is; the fork's own page names its origin."""
    try:
        fork = forks.fork_run(run_id=run.id, seq=data["checkpoint"], version=data.get("version"),
                              state=data.get("state"), reason=data["reason"], user=user, source="console")
    except forks.NoSuchCheckpoint as exc:
        raise InvalidInput({"checkpoint": [str(exc)]}) from None
    except InvalidInput as exc:  # the state model's fields ("state.done") shown on the form's state, named
        shown: dict[str, list[str]] = {}
        for name, errors in exc.errors.items():
            shown.setdefault(name.partition(".")[0], []).extend(f"{name}: {error}" for error in errors)
        raise InvalidInput(shown) from None
    return run, (f"Forked from checkpoint {data['checkpoint']}: the new run is {fork.id} (listed under Forks). "
                 "What this run's family already performed is not performed again.")


ACTIONS: dict[str, RunAction] = {action.name: action for action in (
    RunAction("cancel", "Cancel the run", "The run stops for good; a worker holding it loses its lease at its next "
              "write, and its open approval requests close. What already happened stays done: the answer names it.",
              "durable.cancel_run", services.CANCELLABLE, _cancel),
    RunAction("retry", "Retry now", "The run goes back to PENDING and continues from its last checkpoint now, "
              "without waiting for its next attempt time.", "durable.retry_run", services.RETRYABLE,
              _steer(services.retry_run, "Retried. The run continues from its last checkpoint.")),
    RunAction("pause", "Pause", "The run stops at its next step boundary: a call in flight finishes and is recorded, "
              "and no step starts after it. A run that waits stays parked, and nothing wakes it until it is resumed. "
              "Resume continues it where it stopped.", "durable.pause_run", pauses.PAUSABLE,
              _steer(pauses.pause_run, "Paused. It stops at its next step boundary; resume continues it there.")),
    RunAction("resume", "Resume", "A paused run continues where it stopped: the step it stopped in runs again from its "
              "checkpoint, reusing what it recorded. A blocked run: a worker checks the run's replay contract again "
              "(deploy its version first, or it is blocked again).", "durable.resume_run",
              frozenset({RunStatus.BLOCKED_VERSION, RunStatus.PAUSED}),
              _steer(pauses.resume_run, "Resumed. A worker takes the run up where it stopped.")),
    RunAction("migrate", "Migrate to another version", "The run moves to the chosen version through the migration "
              "that version declares: a new checkpoint with the upcast state, and the mapped next step.",
              "durable.migrate_run", frozenset({RunStatus.BLOCKED_VERSION}), _migrate),
    RunAction("budget", "Raise the budget", "The run's budget stopped it before a model call. Give it a higher "
              "limit (above what it has used) and it goes on from that step visit: what the visit recorded is reused, "
              "not asked again. Or cancel it.", budgets.RAISE_BUDGET, frozenset({RunStatus.NEEDS_ATTENTION}),
              _raise_budget),
    RunAction("fork", "Fork from here", "A new run starts from this checkpoint, on this version or a newer one that "
              "takes over from it, with this state or the one you give. A business action this run's family already "
              "performed is not performed again: the fork takes its recorded result.", "durable.fork_run",
              frozenset(RunStatus), _fork),
)}


def offered_actions(run: Run, user: Caller) -> list[RunAction]:
    """The actions this user may take on this run in its current status."""
    return [action for action in ACTIONS.values() if action.offered(run, user)]
