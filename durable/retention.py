"""Data retention: finished runs shed their checkpoints and journal; the ledger and audit trail stay.

Only runs that can never move again are pruned: SUCCEEDED and CANCELLED. A FAILED run can
be retried by an operator, and a retry replays its recorded activity results, so its
journal is kept. A pruned run keeps its newest checkpoint (the state it ended in, stored whole:
durable.store.checkpoints.store_whole), its row (status, output, error), its ledger rows (what happened
downstream, by operation id) and every audit row. `compact` alone (durable_prune --checkpoints-only)
keeps the journal too.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Sum, TextField, Value
from django.db.models.functions import Cast, Coalesce, Length
from django.utils import timezone

from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run
from durable.store.checkpoints import store_whole

PRUNABLE = (RunStatus.SUCCEEDED, RunStatus.CANCELLED)


@dataclass
class PruneReport:
    runs: int = 0
    checkpoints: int = 0
    journal_entries: int = 0
    freed_bytes: int = 0  # the JSON the deleted rows held (states, differences, results, details)
    kept_journal: bool = False

    def __str__(self) -> str:
        freed = f"about {self.freed_bytes / 1e6:,.1f} MB of JSON freed"
        if self.kept_journal:
            return (f"compacted {self.runs} finished run(s) to their last checkpoint: {self.checkpoints} "
                    f"checkpoint(s) deleted, {freed}; journal, ledger and audit trail kept")
        return (f"pruned {self.runs} finished run(s): {self.checkpoints} checkpoint(s) and "
                f"{self.journal_entries} journal entr{'y' if self.journal_entries == 1 else 'ies'} deleted, "
                f"{freed}; ledger and audit trail kept")


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
    return report
