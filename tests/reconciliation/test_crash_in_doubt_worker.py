"""The finding, with real worker processes: a worker SIGKILLed while a ctx.parallel group of four side effects was
in flight against a downstream that neither honours idempotency keys nor can be looked up. The worker that takes
the run over leaves all four UNKNOWN at once, and one round of resolving lets it finish."""
from __future__ import annotations

import pytest

from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import SideEffect
from durable.runtime.fault_points import AFTER_DOWNSTREAM
from durable.tools.processes import WorkerProcess
from tests.durable.runtime.test_waits_worker import SWEEPING, died_at, doomed_worker, ended
from tests.durable.visit_workflows import NOTICES
from tests.durable.workflows import calls_in
from tests.reconciliation.test_crash_in_doubt import in_doubt, resolve_all_once, start_notices
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_killed_mid_group_leaves_everything_in_doubt_for_one_round_of_resolving(
        own_queue, tmp_path, worker_log_dir):
    doomed = doomed_worker(AFTER_DOWNSTREAM, tmp_path, worker_log_dir)
    try:
        run = start_notices(tmp_path)
        died_at(doomed, AFTER_DOWNSTREAM, tmp_path)  # the first answer came back; none was recorded
    finally:
        doomed.stop()
    assert set(SideEffect.objects.filter(run=run).values_list("status", flat=True)) == {Op.STARTED}

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "in-doubt-rescuer.log", name="rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.NEEDS_ATTENTION, timeout=60,
                 what="the rescuer to find the operations in doubt")
        run.refresh_from_db()
        unknown = in_doubt(run)
        assert len(unknown) == SideEffect.objects.filter(run=run).count() == NOTICES
        assert sorted(run.error["operation_ids"]) == unknown
        resolve_all_once(run)  # one round, while the run stays held until the last is resolved
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    sent = calls_in(tmp_path / "sent")
    assert len(sent) == len(set(sent)) <= NOTICES  # nothing was sent twice
