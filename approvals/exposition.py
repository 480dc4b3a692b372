"""The approvals' gauges on GET /metrics (durable/exposition.py), added from ApprovalsConfig.ready()."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily

from approvals.selectors import pending_summary
from durable.exposition import age


def approval_gauges(now: datetime) -> Iterator[GaugeMetricFamily]:
    summary = pending_summary()
    pending = GaugeMetricFamily("approval_pending", "Approval requests waiting for a human decision")
    pending.add_metric([], summary.count)
    yield pending
    oldest = GaugeMetricFamily("approval_oldest_pending_age_seconds",
                               "Seconds the oldest pending approval request has waited (0 when none waits)")
    oldest.add_metric([], age(now, summary.oldest_created_at))
    yield oldest
    if summary.soonest_expiry is not None:  # absent, not 0, when nothing can expire: 0 would look urgent
        expiry = GaugeMetricFamily("approval_next_expiry_seconds",
                                   "Seconds until the soonest pending approval request expires")
        expiry.add_metric([], (summary.soonest_expiry - now).total_seconds())
        yield expiry
