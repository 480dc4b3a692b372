"""The operator console's run screens (read-only here; the console issue adds actions)."""
