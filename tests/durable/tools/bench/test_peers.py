"""Peers run in processes of their own; one that is not installed is a row that says so."""
from __future__ import annotations

from durable.tools.bench import peers
from durable.tools.bench.compare import DBOS, NOT_INSTALLED
from durable.tools.bench.peers import Workload, installed, run_peer


def test_a_peer_without_its_package_is_reported_not_installed_without_starting_anything(monkeypatch):
    monkeypatch.setattr(peers, "installed", lambda module: False)
    monkeypatch.setattr(peers.subprocess, "run", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("started")))
    result = run_peer(DBOS, Workload(3, 3, False, "postgres://nowhere/db"), timeout=5)
    assert result.note == NOT_INSTALLED and not result.measured


def test_a_missing_parent_package_counts_as_not_installed():
    assert not installed("no_such_package_here.checkpoint")
    assert installed("psycopg")


def test_a_peer_that_fails_says_how(monkeypatch):
    class Done:
        returncode, stdout, stderr = 1, "", "Traceback ...\nOperationalError: connection refused\n"

    monkeypatch.setattr(peers, "installed", lambda module: True)
    monkeypatch.setattr(peers.subprocess, "run", lambda *a, **kw: Done())
    result = run_peer(DBOS, Workload(3, 3, False, "postgres://nowhere/db"), timeout=5)
    assert result.note == "failed (exit 1): OperationalError: connection refused"
