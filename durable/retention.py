"""Data retention: finished runs shed their checkpoints and journal; the ledger and audit trail stay.

Only runs that can never move again are pruned: SUCCEEDED and CANCELLED. A FAILED run can
be retried by an operator, and a retry replays its recorded activity results, so its
journal is kept. A pruned run keeps its newest checkpoint (the state it ended in, stored whole:
durable.store.checkpoints.store_whole), its row (status, output, error), its ledger rows (what happened
downstream, by operation id) and every audit row. `compact` alone (durable_prune --checkpoints-only)
keeps the journal too. Both then delete the large values stored apart (durable.store.values) that no checkpoint
or journal entry refers to any more.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Sum, TextField, Value
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast, Coalesce, Length
from django.utils import timezone

from durable.engine.large_values import REFERENCES
from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run, StoredValue
from durable.store.checkpoints import store_whole
from durable.store.values import UNREFERENCED_GRACE

PRUNABLE = (RunStatus.SUCCEEDED, RunStatus.CANCELLED)


@dataclass
class PruneReport:
    runs: int = 0
    checkpoints: int = 0
    journal_entries: int = 0
    freed_bytes: int = 0  # the JSON the deleted rows held (states, differences, results, details)
    kept_journal: bool = False
    values: int = 0  # large values stored apart that nothing refers to any more, deleted
    value_bytes: int = 0  # what they weighed

    def values_text(self) -> str:
        return (f"; {self.values} large value(s) no row refers to any more deleted "
                f"(about {self.value_bytes / 1e6:,.1f} MB)")

    def __str__(self) -> str:
        freed = f"about {self.freed_bytes / 1e6:,.1f} MB of JSON freed"
        if self.kept_journal:
            return (f"compacted {self.runs} finished run(s) to their last checkpoint: {self.checkpoints} "
                    f"checkpoint(s) deleted, {freed}; journal, ledger and audit trail kept{self.values_text()}")
        return (f"pruned {self.runs} finished run(s): {self.checkpoints} checkpoint(s) and "
                f"{self.journal_entries} journal entr{'y' if self.journal_entries == 1 else 'ies'} deleted, "
                f"{freed}; ledger and audit trail kept{self.values_text()}")


def prunable_runs(cutoff: datetime, batch: int) -> list[UUID]:
    """The oldest finished runs, finished before `cutoff`, not pruned yet (a partial index's rows)."""
    runs = Run.objects.filter(status__in=PRUNABLE, pruned_at__isnull=True, finished_at__lt=cutoff)
    return list(runs.order_by("finished_at", "id").values_list("id", flat=True)[:batch])


def json_weight(rows: QuerySet, *columns: str) -> int:
    """What the rows' JSON columns hold, in bytes of JSON text: what deleting them frees (near enough)."""
    sizes = [Coalesce(Length(Cast(column, TextField())), Value(0)) for column in columns]
    total = sum(sizes[1:], sizes[0])
    return int(rows.aggregate(weight=Sum(total))["weight"] or 0)


def compact_batch(run_ids: list[UUID], report: PruneReport) -> None:
    """Store each run's newest checkpoint whole and delete the checkpoints before it; one transaction."""
    with transaction.atomic():
        older = Checkpoint.objects.filter(run_id__in=run_ids, seq__lt=F("run__checkpoint_seq"))
        report.freed_bytes += json_weight(older, "state", "delta")
        for run_id, seq in Checkpoint.objects.filter(run_id__in=run_ids, seq=F("run__checkpoint_seq"),
                                                     state__isnull=True).values_list("run_id", "seq"):
            store_whole(run_id, seq)  # a difference: its whole state first, from the rows about to go
        report.checkpoints += older.delete()[0]


def prune_batch(run_ids: list[UUID], report: PruneReport) -> None:
    """Keep only the newest checkpoint (stored whole) of these runs, delete their journal, and mark them; one
    transaction."""
    with transaction.atomic():
        compact_batch(run_ids, report)
        journal = JournalEntry.objects.filter(run_id__in=run_ids)
        report.freed_bytes += json_weight(journal, "result", "detail")
        report.journal_entries += journal.delete()[0]
        Run.objects.filter(id__in=run_ids).update(pruned_at=timezone.now())
    report.runs += len(run_ids)


def prune(older_than: timedelta, batch: int = 2000) -> PruneReport:
    """Prune every finished run older than `older_than`, `batch` runs per transaction."""
    cutoff, report = timezone.now() - older_than, PruneReport()
    while run_ids := prunable_runs(cutoff, batch):
        prune_batch(run_ids, report)
    report.values, report.value_bytes = prune_values()
    return report


def compact_finished(older_than: timedelta, batch: int = 2000) -> PruneReport:
    """Compact every finished run older than `older_than` to its last checkpoint, keeping its journal: a
    retried or audited run still has every recorded result. `batch` runs per transaction, oldest first."""
    cutoff, report = timezone.now() - older_than, PruneReport(kept_journal=True)
    has_older = Exists(Checkpoint.objects.filter(run=OuterRef("pk"), seq__lt=OuterRef("checkpoint_seq")))
    runs = Run.objects.filter(has_older, status__in=PRUNABLE, finished_at__lt=cutoff).order_by("finished_at", "id")
    after = Q()
    while found := list(runs.filter(after).values_list("id", "finished_at")[:batch]):
        compact_batch([run_id for run_id, _ in found], report)
        report.runs += len(found)
        last_id, last_at = found[-1]
        after = Q(finished_at__gt=last_at) | Q(finished_at=last_at, id__gt=last_id)
    report.values, report.value_bytes = prune_values()
    return report


def referenced_values() -> set[str]:
    """The hashes of the large values some checkpoint (its state or difference) or journal entry (its result)
    refers to: read from the envelopes' reference lists only, never the values around them."""
    found: set[str] = set()
    for model, column in ((Checkpoint, "state"), (Checkpoint, "delta"), (JournalEntry, "result")):
        rows = (model.objects.filter(**{f"{column}__has_key": REFERENCES})
                .annotate(references=KeyTransform(REFERENCES, column)).values_list("references", flat=True))
        for listed in rows.iterator(chunk_size=2000):
            found.update(address for _, address in listed or ())
    return found


def prune_values(grace: timedelta = UNREFERENCED_GRACE, batch: int = 1000) -> tuple[int, int]:
    """Delete the large values stored apart that no row refers to, untouched for `grace`: (how many, bytes).

    Safe beside writers in flight: a writer stores or touches a value (its written_at) before it writes the row
    that refers to it, moments later. A value is deleted only if untouched since `grace` before this began, so one
    whose row was not yet written when the references were read is recent and kept; and the delete re-reads
    written_at under a row lock, so a writer that touches a value meanwhile either keeps it (its touch came first)
    or, its touch finding no row (the delete came first), stores it again."""
    cutoff = timezone.now() - grace
    old = list(StoredValue.objects.filter(written_at__lt=cutoff).values_list("hash", flat=True))
    if not old:
        return 0, 0
    unreferenced = sorted(set(old) - referenced_values())
    deleted = freed = 0
    for start in range(0, len(unreferenced), batch):
        with transaction.atomic():
            doomed = list(StoredValue.objects.select_for_update().filter(
                hash__in=unreferenced[start:start + batch], written_at__lt=cutoff).values_list("hash", "size"))
            StoredValue.objects.filter(hash__in=[address for address, _ in doomed]).delete()
        deleted, freed = deleted + len(doomed), freed + sum(size for _, size in doomed)
    return deleted, freed
