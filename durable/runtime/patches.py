"""`ctx.patched(name)`: may this visit take the code a patch added? Answered once per visit, recorded in the journal.

True for a visit that reaches the patch on code that has it; False for a visit an earlier execution ran past this
point on code without it (it recorded something further on: durable.engine.replay.history_goes_past), so the run
goes on as it began. The answer is journaled (kind `patch`) under the visit, so the visit run again, and
`durable_replay`, answer the same (docs/workflow-versions.md, "Patches").
"""
from __future__ import annotations

from django.apps import apps

from durable.engine.replay import history_goes_past
from durable.models import JournalEntry, SideEffect
from durable.runtime.visit import Visit


def patched(visit: Visit, name: str, answered: dict[str, bool], approvals_asked: int) -> bool:
    """The visit's answer for patch `name`: recorded, or decided now and recorded. `answered` is the visit's own."""
    if not answered:  # first ask in this execution: what earlier executions recorded
        answered.update(_recorded(visit))
    if name in answered:
        return answered[name]
    answer = not history_goes_past(visit.cursor, _operations(visit), _approval_positions(visit), approvals_asked,
                                   _parked_at(visit))
    visit.store.journal(visit.lease, JournalEntry.Kind.PATCH, visit.step, name=name, detail={"patched": answer})
    answered[name] = answer
    return answer


def _recorded(visit: Visit) -> dict[str, bool]:
    entries = JournalEntry.objects.filter(run_id=visit.run_id, step=visit.step, visit=visit.visit,
                                          kind=JournalEntry.Kind.PATCH).order_by("-id")  # the first answer wins
    return {name: bool((detail or {}).get("patched")) for name, detail in entries.values_list("name", "detail")}


def _operations(visit: Visit) -> set[str]:
    return set(SideEffect.objects.filter(run_id=visit.run_id, step=visit.step, visit=visit.visit)
               .values_list("operation_id", flat=True))


def _approval_positions(visit: Visit) -> set[int]:
    if not apps.is_installed("approvals"):
        return set()
    requests = apps.get_model("approvals", "ApprovalRequest").objects
    return set(requests.filter(run_id=visit.run_id, step=visit.step, visit=visit.visit)
               .values_list("position", flat=True))


def _parked_at(visit: Visit) -> int | None:
    """The call index of the wait this visit parked on before it was woken, if it was this visit's."""
    woke = visit.woke_from or {}
    if woke.get("step") == visit.step and woke.get("visit") == visit.visit and woke.get("call_index") is not None:
        return int(woke["call_index"])
    return None
