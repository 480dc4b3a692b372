"""Reconciliation of STARTED and UNKNOWN side effects (built in the ledger issue)."""
