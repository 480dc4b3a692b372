"""Data retention: finished runs shed their checkpoints and journal; the ledger and audit trail stay.

Only runs that can never move again are pruned: SUCCEEDED and CANCELLED. A FAILED run can
be retried by an operator, and a retry replays its recorded activity results, so its
journal is kept. A pruned run keeps its newest checkpoint (the state it ended in), its row
(status, output, error), its ledger rows (what happened downstream, by operation id) and
every audit row.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run

PRUNABLE = (RunStatus.SUCCEEDED, RunStatus.CANCELLED)


@dataclass
class PruneReport:
    runs: int = 0
    checkpoints: int = 0
    journal_entries: int = 0

    def __str__(self) -> str:
        return (f"pruned {self.runs} finished run(s): {self.checkpoints} checkpoint(s) and "
                f"{self.journal_entries} journal entr{'y' if self.journal_entries == 1 else 'ies'} deleted; "
                "ledger and audit trail kept")


def prunable_runs(cutoff: datetime, batch: int) -> list[UUID]:
    """The oldest finished runs, finished before `cutoff`, not pruned yet (a partial index's rows)."""
    runs = Run.objects.filter(status__in=PRUNABLE, pruned_at__isnull=True, finished_at__lt=cutoff)
    return list(runs.order_by("finished_at", "id").values_list("id", flat=True)[:batch])


def prune_batch(run_ids: list[UUID]) -> tuple[int, int]:
    """Delete all but the newest checkpoint, and the whole journal, of these runs, and mark them; one transaction."""
    with transaction.atomic():
        checkpoints, _ = Checkpoint.objects.filter(run_id__in=run_ids, seq__lt=F("run__checkpoint_seq")).delete()
        journal, _ = JournalEntry.objects.filter(run_id__in=run_ids).delete()
        Run.objects.filter(id__in=run_ids).update(pruned_at=timezone.now())
    return checkpoints, journal


def prune(older_than: timedelta, batch: int = 2000) -> PruneReport:
    """Prune every finished run older than `older_than`, `batch` runs per transaction."""
    cutoff, report = timezone.now() - older_than, PruneReport()
    while run_ids := prunable_runs(cutoff, batch):
        checkpoints, journal = prune_batch(run_ids)
        report.runs += len(run_ids)
        report.checkpoints += checkpoints
        report.journal_entries += journal
    return report
