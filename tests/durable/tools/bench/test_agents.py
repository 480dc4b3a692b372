"""`durable_bench --agents N`: runs of five model calls on real workers against the fake model server, every call
made once; `--compare`: the same on the peers, or a line saying they are not installed."""
from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable.models import Run
from durable.tools.bench import fleet
from durable.tools.bench.compare import DBOS, NOT_INSTALLED
from durable.tools.bench.figures import AgentsResult
from durable.tools.bench.peers import agents as peer_agents
from durable.tools.bench.peers.agents import LANGGRAPH_ASYNC, run_agents_peer

LINE = (r"agents: 20 runs x 5 calls of 200 ms, 1 worker: wall \d+\.\d s \(ideal 1\.0 s\), peak Postgres connections "
        r"\d+, peak worker RSS \d+ MB; 100 calls, 0 duplicates, 0 missing; server-wide peak \d+ of \d+ connections")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_agents_run_on_a_real_worker_print_one_line_make_every_call_once_and_leave_no_run(capsys):
    call_command("durable_bench", "--agents", "20", "--call-ms", "200", "--workers", "1", "--worker-runs", "10")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and re.match(LINE, out[0]), out
    assert "; pool threads, 10 runs in flight per worker, a connection" in out[0]
    cpu = re.search(r"CPU: workers (\d+\.\d) s \(\d+\.\d\d ms a step\), Postgres backends \d+\.\d s .*, the "
                    r"benchmark's process \d+\.\d s \(.*\), of which the fake model server \d+\.\d s", out[0])
    assert cpu and float(cpu[1]) > 0, out[0]  # the worker's own CPU, read from /proc while the runs ran
    assert not Run.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_compare_prints_durable_first_then_each_peer_measured_or_not_installed(capsys):
    call_command("durable_bench", "--agents", "4", "--call-ms", "100", "--workers", "1", "--worker-runs", "4",
                 "--compare")
    durable, *peers = capsys.readouterr().out.strip().splitlines()
    assert durable.startswith("agents: 4 runs x 5 calls of 100 ms, 1 worker: wall ")
    assert [line.split(":")[0] for line in peers] == [f"agents on {DBOS}", f"agents on {LANGGRAPH_ASYNC}"]
    for line in peers:
        assert line.endswith(NOT_INSTALLED) or "20 calls, 0 duplicates, 0 missing" in line, line


def test_a_peer_not_installed_is_a_line_saying_so_and_starts_nothing(monkeypatch):
    monkeypatch.setattr(peer_agents, "installed", lambda module: False)
    monkeypatch.setattr(peer_agents, "Child", lambda *a: (_ for _ in ()).throw(AssertionError("started")))
    line = run_agents_peer(DBOS, 10, 1000, 2, 5, "postgres://nowhere/db", timeout=5).line()
    assert line == f"agents on {DBOS}: 10 runs x 5 calls of 1000 ms, 2 workers: {NOT_INSTALLED}"


def test_the_line_reads_as_the_issue_writes_it():
    result = AgentsResult("durable", 2000, 5, 1000, 2, seconds=9.84, connections=38, server_connections=41,
                          max_connections=100, rss_mb=1234.4, made=10000)
    assert result.line().startswith("agents: 2000 runs x 5 calls of 1000 ms, 2 workers: wall 9.8 s (ideal 5.0 s), "
                                    "peak Postgres connections 38, peak worker RSS 1234 MB; 10000 calls, "
                                    "0 duplicates, 0 missing")


@pytest.mark.django_db
def test_a_load_whose_connections_would_not_fit_the_server_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setattr(fleet, "free_connections", lambda: (60, 100))
    monkeypatch.setattr(fleet, "SETTINGS", {})  # code before issue 37's connection pool: a connection per thread
    with pytest.raises(CommandError, match=r"may open 306 connections .* the server has 60 of 100 free"):
        call_command("durable_bench", "--agents", "300", "--workers", "2", "--worker-runs", "150")
    assert not Run.objects.exists()


def test_without_a_pool_a_worker_needs_a_connection_per_run_in_flight_and_with_one_its_pools_size(monkeypatch):
    given = fleet.Fleet(2, "threads", 1000, db_pool_size=10)
    assert given.connections_each() == 10 + fleet.OVERHEAD_CONNECTIONS
    assert given.describe() == "pool threads, 1000 runs in flight per worker, a connection pool of 10 each"
    monkeypatch.setattr(fleet, "SETTINGS", {})  # code before issue 37's connection pool
    assert fleet.Fleet(2, "solo", 150).connections_each() == 1 + fleet.OVERHEAD_CONNECTIONS
    assert fleet.Fleet(2, "threads", 150).connections_each() == 150 + fleet.OVERHEAD_CONNECTIONS
    assert fleet.Fleet(2, "threads", 150).describe() == "pool threads, 150 runs in flight per worker, a connection per thread"


def test_the_workers_are_told_their_runs_in_flight_and_pool_and_any_variable_given():
    env = fleet.Fleet(2, "threads", 150, 10, {"DURABLE_LEASE_SECONDS": "20"}).worker_env()
    assert env == {"DURABLE_WORKER_RUNS": "150", "DURABLE_DB_POOL_SIZE": "10", "DURABLE_LEASE_SECONDS": "20"}
    assert fleet.Fleet(2, "solo").worker_env() == {}


def test_a_worker_refused_a_connection_stops_every_worker_at_once(tmp_path):
    class Worker:
        killed = False

        def kill(self):
            self.killed = True

    class Peaks:
        exhausted, server_connections, max_connections, database_connections = False, 80, 100, 70

    log = tmp_path / "worker.log"
    log.write_text("an old line: too many clients already\n")  # before the benchmark: not its workers'
    workers = [Worker(), Worker()]
    tick = fleet._stop_if_refused(Peaks(), fleet.LogWatch([log]), workers)
    tick()
    assert not any(w.killed for w in workers)
    with log.open("a") as more:
        more.write("psycopg.OperationalError: FATAL:  sorry, too many clients already\n")
    with pytest.raises(fleet.Stopped, match="connections ran out .*too many clients"):
        tick()
    assert all(w.killed for w in workers)


def test_the_servers_connections_running_out_stops_the_workers_too(tmp_path):
    class Peaks:
        exhausted, server_connections, max_connections, database_connections = True, 97, 100, 60

    with pytest.raises(fleet.Stopped, match=r"connections ran out \(97 of 100; peak for this database 60\)"):
        fleet._stop_if_refused(Peaks(), fleet.LogWatch([]), [])()


@pytest.mark.django_db
def test_with_compare_a_refused_durable_says_why_on_its_line_and_the_peers_are_measured_all_the_same(monkeypatch, capsys):
    monkeypatch.setattr(fleet, "free_connections", lambda: (60, 100))
    monkeypatch.setattr(fleet, "SETTINGS", {})
    measured = []

    def peer(system, runs, call_ms, workers, worker_runs, database_url, **kwargs):
        measured.append(system)
        return AgentsResult(system, runs, 5, call_ms, workers, note="measured here")

    monkeypatch.setattr(peer_agents, "run_agents_peer", peer)
    with pytest.raises(CommandError, match="durable was not measured: .*may open 2006 connections"):
        call_command("durable_bench", "--agents", "2000", "--workers", "2", "--compare")
    durable, *peers = capsys.readouterr().out.strip().splitlines()
    assert durable.startswith("agents: 2000 runs x 5 calls of 1000 ms, 2 workers: failed: ")
    assert measured == [DBOS, LANGGRAPH_ASYNC] and all(line.endswith("measured here") for line in peers)


@pytest.mark.django_db
def test_a_model_call_made_twice_fails_the_benchmark_after_its_line(monkeypatch, capsys):
    doubled = AgentsResult("durable", 20, 5, 200, 1, seconds=1.4, made=101, duplicates=1)
    monkeypatch.setattr(fleet, "measure_agents", lambda *args: doubled)
    with pytest.raises(CommandError, match="durable made 1 duplicate and 0 missing model calls of 100"):
        call_command("durable_bench", "--agents", "20", "--call-ms", "200", "--workers", "1")
    assert "101 calls, 1 duplicates, 0 missing" in capsys.readouterr().out
