"""What the core tells the apps built on it, without importing them: they connect in their ready()."""
from django.dispatch import Signal

# A run was cancelled; sent inside the cancelling transaction, with `run` (the cancelled Run).
# approvals closes the run's pending requests (approvals/receivers.py).
run_cancelled = Signal()
