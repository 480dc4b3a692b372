"""The benchmarks' sampler: peak memory and the CPU the measured processes (and their descendants) used."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from durable.tools.bench import peaks
from durable.tools.bench.peaks import Peaks, descendants, rss_bytes


def test_descendants_and_their_memory_are_found_from_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants([os.getpid()])
        assert rss_bytes([os.getpid()]) > rss_bytes([child.pid]) > 0
    finally:
        child.kill()
        child.wait()


def test_cpu_is_counted_from_the_first_sample_for_every_process_seen_and_descendants_looked_for_now_and_then(
        monkeypatch):
    looked: list[list[int]] = []
    real = peaks.descendants
    monkeypatch.setattr(peaks, "descendants", lambda pids: looked.append(list(pids)) or real(pids))
    sampler = Peaks("unused", pids=lambda: [os.getpid()])  # its /proc half only: no database
    sampler.sample_processes(backends=[os.getpid()])
    assert sampler.cpu_seconds == 0.0  # what the process used before the first sample is not counted
    spin_until = time.process_time() + 0.2
    while time.process_time() < spin_until:
        pass
    sampler.sample_processes(backends=[os.getpid()])
    assert 0.1 <= sampler.cpu_seconds <= 5.0 and 0.1 <= sampler.backend_cpu_seconds <= 5.0
    assert len(looked) == 1  # the second sample, within DESCENDANTS_SECONDS, reused the descendants found
