"""The benchmark: trivial workflows through real worker processes, measured."""
