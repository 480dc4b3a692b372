"""What the core tells the apps built on it, without importing them: they connect in their ready()."""
from django.dispatch import Signal

# A run is being cancelled; sent inside the cancelling transaction, with `run` (as it was before).
# A receiver returns what it stopped, in words, for the cancel's answer (or nothing): approvals
# closes the run's pending requests (approvals/receivers.py).
run_cancelled = Signal()

# Something an operator may want to be told of happened (durable.engine.notifications.EventKind). Sent
# inside the transaction of the change itself, so the event is recorded exactly when the change is
# (durable/notifications/receivers.py writes the outbox row). Arguments: `kind`, `run_id`, `subject`
# (the run, request or operation id), `occurrence` (tells two events of one subject apart, e.g. the
# fencing token; "" when the subject has only one) and `detail` (a dict for the message).
operator_event = Signal()
