"""What the core tells the apps built on it, without importing them: they connect in their ready()."""
from django.dispatch import Signal

# A run is being cancelled; sent inside the cancelling transaction, with `run` (as it was before).
# A receiver returns what it stopped, in words, for the cancel's answer (or nothing): approvals
# closes the run's pending requests (approvals/receivers.py).
run_cancelled = Signal()
