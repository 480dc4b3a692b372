"""Retry policy: exponential backoff with jitter, owned by the activity layer alone."""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_interval: float = 1.0
    backoff: float = 2.0
    max_interval: float = 300.0
    jitter: float = 0.2  # +/- fraction of the delay, so retries of many runs spread out

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_interval < 0 or self.max_interval < self.initial_interval:
            raise ValueError("need 0 <= initial_interval <= max_interval")
        if self.backoff < 1 or not 0 <= self.jitter < 1:
            raise ValueError("need backoff >= 1 and 0 <= jitter < 1")

    def allows_another(self, attempts_made: int) -> bool:
        return attempts_made < self.max_attempts

    def delay(self, attempts_made: int, rng: random.Random | None = None, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt number `attempts_made + 1`: the backoff, but never sooner than the
        downstream's Retry-After asked, which is itself capped by `max_interval`."""
        base = min(self.initial_interval * self.backoff ** max(attempts_made - 1, 0), self.max_interval)
        spread = base * self.jitter
        backoff = max(0.0, base + (rng or random).uniform(-spread, spread))
        if retry_after is None:
            return backoff
        return max(backoff, min(max(retry_after, 0.0), self.max_interval))
