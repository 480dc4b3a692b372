"""How much text an operator may type: one limit for every reason, shown before submit and refused above it."""
from __future__ import annotations

# A reason (cancel, retry, resume, migrate, approve, reject, resolve, revoke) is kept whole in the audit
# trail. Over the limit is a 400 naming the field, in the console and the API alike: never cut to fit.
REASON_MAX_LENGTH = 4000
