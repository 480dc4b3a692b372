"""The operations API: the ledger's rows, and the resolution of UNKNOWN ones."""
