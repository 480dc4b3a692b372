"""A ready worker tunes Python's cyclic garbage collector (durable/runtime/worker.py, DURABLE_WORKER_GC_THRESHOLD):
what it loaded to start is frozen out of the collector's walks, and young objects are collected less often."""
import gc
from collections.abc import Iterator

import pytest

from durable.runtime import worker


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_a_ready_worker_freezes_what_it_loaded_and_collects_young_objects_after_the_threshold(settings):
    settings.DURABLE_WORKER_GC_THRESHOLD = 40000
    older = gc.get_threshold()[1:]
    worker._tune_collector()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (40000, *older)


def test_a_threshold_of_0_leaves_pythons_collector_as_it_was(settings):
    settings.DURABLE_WORKER_GC_THRESHOLD = 0
    before = gc.get_threshold()
    worker._tune_collector()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
