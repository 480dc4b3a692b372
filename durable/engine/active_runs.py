"""What starting a workflow does when its business key already has an active run: a workflow's declared policy."""
from __future__ import annotations

from enum import StrEnum


class OnActiveBusinessKey(StrEnum):
    """A workflow's answer to a start whose business key (say, an order id) already has a run that has not ended.

    Without an Idempotency-Key, a client that sends the same start twice (a double click, a retried webhook)
    would otherwise make two runs that each act on the same business object.
    """

    RETURN_EXISTING = "return_existing"  # the default: the start answers with the active run
    REFUSE = "refuse"  # the start is a conflict naming the active run (HTTP 409)
    START_ANOTHER = "start_another"  # runs of one business key may overlap (each must be safe alongside the others)

    @property
    def one_active_run(self) -> bool:
        """Whether a business key has at most one active run of the workflow (a database constraint keeps it)."""
        return self is not OnActiveBusinessKey.START_ANOTHER
