"""Reading a metric before and after an event, from the shared multiprocess directory as /metrics does."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from durable import metrics


@dataclass
class Moved:
    by: float = 0.0


@contextmanager
def counting(sample: str, **labels: str) -> Iterator[Moved]:
    """How much `sample` (summed over every process and the labels not given) moved inside the block."""
    moved = Moved()
    before = metrics.value(sample, **labels)
    yield moved
    moved.by = metrics.value(sample, **labels) - before
