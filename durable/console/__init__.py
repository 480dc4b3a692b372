"""The operator console: the screens on runs and the actions they post, search, bulk actions, the audit trail,
an operator's preferences and API tokens."""
