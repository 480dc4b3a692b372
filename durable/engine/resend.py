"""When the sweeper sends a waiting run to the workers again: soon after a lost message, rarely into a backlog.

A run that waits for a worker (PENDING past the grace period, a lease expired, a retry due) may
have lost its message, or its message may sit in a queue behind thousands of others. The sweeper
cannot tell which. Sending again every grace period would flood a backlog with copies (each copy
makes the backlog longer, which makes more runs look lost), so the gaps grow: the next copy goes
once the run has waited twice as long as when the last one went. Copies go at grace, 2 x grace,
4 x grace... after the run began waiting: a backlog of W seconds costs log2(W / grace) copies
per run instead of W / grace.
"""
from __future__ import annotations

from datetime import datetime, timedelta


def resend_due(*, waiting_since: datetime, last_sent: datetime | None, now: datetime, grace: timedelta) -> bool:
    """Whether a due run (it waits for a worker since `waiting_since`), last sent at `last_sent`, goes again now."""
    if last_sent is None or last_sent < waiting_since:
        return True  # not sent since it began waiting
    return now - last_sent >= max(grace, (now - waiting_since) / 2)
