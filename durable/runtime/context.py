"""The step context: what workflow code may ask of durable inside a step."""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from durable import metrics
from durable.runtime import side_effects
from durable.downstream import Downstream
from durable.engine.approvals import Path
from durable.engine.errors import NonRetryableError, refuse_unstorable
from durable.engine.replay import ReplayCursor
from durable.runtime.gates import ApprovalAsk, GateSite, approval_gate
from durable.runtime.heartbeat import lease_kept
from durable.store import Lease, RunStore

log = logging.getLogger("durable.activity")
T = TypeVar("T")


def to_json(value: Any) -> Any:
    """The JSON form a result is recorded in; live and replayed calls both return it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"activity results must be JSON-serialisable, got {type(value).__name__}")


class StepContext:
    def __init__(self, *, run_id: UUID, business_key: str, workflow_name: str, workflow_version: int,
                 step: str, attempt: int, lease: Lease, store: RunStore, cursor: ReplayCursor,
                 side_effects: tuple[str, ...] = ()) -> None:
        self.run_id = run_id
        self.business_key = business_key
        self.workflow_name = workflow_name
        self.workflow_version = workflow_version
        self.step = step
        self.attempt = attempt
        self._lease = lease
        self._store = store
        self._cursor = cursor
        self._declared_side_effects = side_effects

    @property
    def replayed_calls(self) -> int:
        """How many recorded activity results this step has reused so far."""
        return self._cursor.reused

    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T] | None = None,
                 **kwargs: Any) -> Any:
        """Run a non-deterministic call (LLM, read) once; on replay return what it returned then.

        The result is recorded as JSON before the step goes on. Pass `returns=SomeModel` to
        get it back as that pydantic model, live and on replay alike.
        """
        refuse_unstorable(name, what=f"the name of activity {name!r}", kind="result_not_storable")
        index, recorded = self._cursor.next_call(name)
        if recorded is not None:
            metrics.result_reused(self.workflow_name, self.workflow_version)
            log.info("activity %s replayed: its recorded result is returned", name, extra={"activity": name})
            result = recorded.result
            if self._cursor.replayed_all:  # the step goes live from here: say once what it took from history
                self._store.record_reuse(self._lease, self.step, [
                    {"call_index": call.call_index, "name": call.name} for call in self._cursor.reused_calls])
        else:
            with lease_kept(self._store, self._lease):  # a slow model must not let a second worker ask again
                result = to_json(fn(*args, **kwargs))
            # Refused before it is recorded: the journal never holds what the database cannot store.
            refuse_unstorable(result, what=f"the result of activity {name!r}", kind="result_not_storable")
            self._store.record_activity(self._lease, self.step, index, name, result)
        return returns.model_validate(result) if returns is not None else result  # type: ignore[attr-defined]

    def request_approval(self, kind: str, *, snapshot: dict[str, Any] | Callable[[], dict[str, Any]],
                         approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                         revalidate: Callable[[dict[str, Any]], Any], expires_in: timedelta,
                         on_invalid: str = "ask_again", on_expiry: str = "fail",
                         approvers: int | Callable[[dict[str, Any]], int] = 1) -> dict[str, Any]:
        """Pause the run until a human decides; return the approval once it still holds.

        `snapshot` (a dict, or a function reading it fresh) is what the approver sees; `approve`
        is exactly what is approved (action, amount, target), or a function of the snapshot.
        `revalidate(snapshot)` must be a module-level function returning a `Revalidation`: it
        runs when the request is made, when a human decides, and right before the run acts.
        Invalidated or expired requests take `on_invalid`/`on_expiry`: "ask_again" or "fail".
        Rejection raises `ApprovalRejected`. Give the approval a step of its own: the step
        runs again from its start once the decision is in.
        """
        gate = approval_gate()  # the approvals app's, registered from its ready(); without it, a clear refusal
        site = GateSite(self._store, self._lease, self.run_id, self.step, self.workflow_name, self.workflow_version,
                        self.business_key)
        return gate(site, ApprovalAsk(kind, snapshot, approve, revalidate, expires_in, Path(on_invalid),
                                      Path(on_expiry), approvers))

    def side_effect(self, action: str, *, business_key: str, downstream: Downstream,
                    payload: dict[str, Any]) -> dict[str, Any]:
        """Perform an external action exactly once (the ledger's Prepare -> Execute -> Commit).

        The operation id, sha256("run_id:action:business_key")[:32], is the Idempotency-Key
        sent to downstreams that honour one. Re-entry returns the recorded result.
        """
        if action not in self._declared_side_effects:
            raise NonRetryableError(
                f"step {self.step!r} performs side effect {action!r} but does not declare it; "
                f"add side_effects=[{action!r}] to its @step (it is part of the topology fingerprint)",
                kind="undeclared_side_effect",
            )
        payload = to_json(payload)
        # Chosen by workflow code before anything is prepared or sent: refused, so nothing reaches the ledger.
        refuse_unstorable(business_key, what=f"the business key of side effect {action!r}", kind="payload_not_storable")
        refuse_unstorable(payload, what=f"the payload of side effect {action!r}", kind="payload_not_storable")
        return side_effects.perform(self._store, self._lease, step=self.step, action=action,
                                    business_key=business_key, downstream=downstream, payload=payload)
