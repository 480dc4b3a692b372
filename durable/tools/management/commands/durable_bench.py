"""Benchmark: R workflows of S trivial steps (or `--loop`: one step visited S times) through W real worker
processes; `--compare` measures the same workload on the peers and the floor too. `--agents N`: N runs of five
model calls at once (durable/tools/bench/fleet.py); `--rate-limit R`: calls under a named limit (ratelimit.py);
`--stream N`: from ctx.stream to an SSE client's receipt, N clients following N runs (stream.py)."""
from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from durable import services
from durable.conf import durable_settings
from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import dispatch
from durable.tools.bench import compare, wakeup
from durable.tools.bench.compare import DURABLE, DURABLE_IN_PROCESS, DURABLE_SOLO, SystemResult
from durable.tools.bench.measure import BenchResult, measure, run_table_updates, step_intervals_ms
from durable.tools.bench.peers import RUNNERS, Workload, run_peer
from durable.tools.bench.phases import PhaseReport, time_phases
from durable.tools.bench.wakeup import Wakeups
from durable.tools.bench.workflows import bench_workflow, visits_per_run
from durable.tools.processes import WorkerProcess, database_url
from durable.tools.workload import delete_runs, retire, scope_env, tool_account, wait_for_runs
from durable.workflow import Workflow

HOW_MEASURED = """\
  steps/s: the workload's steps / wall time from the first workflow started to the last finished
  (durable: from enqueueing the runs to the last run's finished_at, workers already started: the
  documented worker, the threads pool advancing DURABLE_WORKER_RUNS runs at once, and the solo pool,
  one run at a time; the others: R workflows run one after another in one process of their own).
  per-step: the time between two consecutive step completions of one workflow, i.e. one step plus
  its durable write. durable: between consecutive checkpoints' created_at. DBOS: perf_counter after
  each @DBOS.step returned. LangGraph (durability="sync"): perf_counter as each node starts, once the
  previous node's checkpoint is written. Floor: perf_counter after each INSERT's autocommit."""


class Command(BaseCommand):
    help = ("Run R workflows of S trivial steps through W Celery worker processes and report throughput; "
            "--compare runs the same workload on DBOS, LangGraph and a plain INSERT+COMMIT floor.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--steps", type=int, default=10)
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
        parser.add_argument("--keep", action="store_true", help="keep the benchmark's runs in the database")
        parser.add_argument("--compare", action="store_true",
                            help="measure the same workload on the peers (the bench extra) and the floor, on Postgres")
        parser.add_argument("--workers-list", default="1,2,4", help="with --compare: worker counts to scale over")
        parser.add_argument("--repeat", type=int, default=1,
                            help="with --compare: measure each row this many times and report the median")
        parser.add_argument("--in-process", action="store_true",
                            help="advance the runs in this process (no broker, no worker) and show where a "
                                 "run's time goes: the lease claim, the reads, the step writes, the rest")
        parser.add_argument("--wakeups", type=int, default=None,
                            help="probe runs measuring wake-up latency with the 1-worker benchmark's worker "
                                 "(API start, approval, retry); default 50 with --compare, else 0")
        parser.add_argument("--sweeper-at", type=int, default=0, metavar="RUNS",
                            help="seed RUNS runs (Postgres; use a scratch database), time the sweeper's query "
                                 "on them, and remove them (with --keep: leave them for durable_console_bench --reuse)")
        parser.add_argument("--parked", type=int, default=0, metavar="RUNS",
                            help="seed RUNS runs parked on timers and events (Postgres; use a scratch database), time "
                                 "and explain the sweeper's queries beside them, and remove them (with --keep: leave "
                                 "them for durable_console_bench --reuse)")
        parser.add_argument("--reuse", action="store_true",
                            help="with --parked: time the parked runs an earlier --parked --keep left; seed nothing")
        parser.add_argument("--resume-with", type=int, default=0, metavar="N",
                            help="time resuming a run that has N recorded activity results, in this process")
        parser.add_argument("--kill", type=int, default=0, metavar="N",
                            help="SIGKILL the worker holding a run N times, with the default settings and no beat, "
                                 "and report SIGKILL -> resumed p50/p99 (docs/benchmarks.md)")
        parser.add_argument("--side-effect", action="store_true",
                            help="with --in-process: one more step per run, with one side effect")
        parser.add_argument("--parallel", type=int, default=0, metavar="N",
                            help="time --runs runs of one step making N activities at once (ctx.parallel), "
                                 "each taking --call-ms, in this process")
        parser.add_argument("--call-ms", type=float, default=None,
                            help="how long each call takes: with --parallel (default 50), --agents (default 1000), "
                                 "--rate-limit (default 100)")
        parser.add_argument("--agents", type=int, default=0, metavar="N",
                            help="N runs of 5 steps, each one model call (ctx.activity, httpx) to a fake model server "
                                 "answering after --call-ms, started together on --workers real workers; reports the "
                                 "wall time, peak Postgres connections and worker memory, and duplicate calls "
                                 "(with --compare: the same on the peers)")
        parser.add_argument("--rate-limit", type=int, default=0, metavar="PER_SECOND",
                            help="runs whose model calls name the limit `bench` of PER_SECOND calls a second "
                                 "(DURABLE_LIMITS) on --workers real workers: the busiest 1-second window and the "
                                 "throughput at the fake model server (--agents runs, default 10 s of calls)")
        parser.add_argument("--pool", default="threads",
                            help="with --agents/--rate-limit: the workers' Celery pool (solo: one run at a time)")
        parser.add_argument("--worker-runs", type=int, default=None, metavar="N",
                            help="with --agents/--rate-limit: runs in flight per worker (the pool's concurrency and "
                                 "DURABLE_WORKER_RUNS); default every run at once")
        parser.add_argument("--db-pool-size", type=int, default=None, metavar="N",
                            help="with --agents/--rate-limit: DURABLE_DB_POOL_SIZE for the workers")
        parser.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE",
                            help="with --agents/--rate-limit: an environment variable for the workers (repeatable)")
        parser.add_argument("--events", type=int, default=0, metavar="N",
                            help="park N runs on ctx.wait_for_event, send each its event (durable.send_event) one "
                                 "after another, and report event sent -> the step running again, with 1 real worker")
        parser.add_argument("--timers", type=int, default=0, metavar="N",
                            help="start N runs sleeping random durations (ctx.sleep) and report timer due -> the "
                                 "step running again, with 1 real worker and its sweeper")
        parser.add_argument("--timer-seconds", default="0.2,6", metavar="SHORTEST,LONGEST",
                            help="with --timers: the range the sleeps are drawn from, in seconds")
        parser.add_argument("--timers-per-second", type=float, default=20.0,
                            help="with --timers: how many runs to start a second")
        parser.add_argument("--stream", type=int, default=0, metavar="RUNS",
                            help="stream latency: RUNS runs publishing with ctx.stream, each followed by an SSE client "
                                 "through a threaded gunicorn; p50/p99 from publish to receipt (durable/tools/bench/"
                                 "stream.py)")
        parser.add_argument("--conversation", type=int, default=0, metavar="TURNS",
                            help="one run visiting one step TURNS times through a real worker, each visit appending "
                                 "--turn-bytes of text to a list: the database's growth and the last visits' time "
                                 "beside the first's (with --compare: on LangGraph and DBOS too)")
        parser.add_argument("--turn-bytes", type=int, default=4000, help="with --conversation: what a turn appends")
        parser.add_argument("--large-bytes", type=int, default=0,
                            help="with --conversation: each turn also appends the same tool result of this many "
                                 "bytes (a recorded activity); measured with large values stored once and inline")
        parser.add_argument("--schedules", type=int, default=0, metavar="N",
                            help="N schedules, one fire time each: how late each one's run starts (p50, p99)")
        parser.add_argument("--schedules-per-second", type=float, default=5.0,
                            help="with --schedules: how many fire times fall due a second")
        parser.add_argument("--loop", action="store_true",
                            help="runs of one step that routes back to itself, visited --steps times, instead "
                                 "of --steps declared steps (what a loop visit costs beside a declared step)")

    def handle(self, *args: Any, runs: int, steps: int, workers: int, timeout: float, keep: bool,
               workers_list: str, repeat: int, **options: Any) -> None:
        if min(runs, steps, workers, repeat) < 1:
            raise CommandError("--runs, --steps, --workers and --repeat must be at least 1")
        comparing = options["compare"]
        if comparing and options["in_process"]:
            raise CommandError("--in-process times durable alone; run it without --compare")
        if comparing and options["loop"]:
            raise CommandError("--loop measures durable alone; run it without --compare")
        if min(options["events"], options["timers"], options["parked"]) < 0 or options["timers_per_second"] <= 0:
            raise CommandError("--events, --timers and --parked take a count (0: off); --timers-per-second more than 0")
        timer_seconds = _seconds_range(options["timer_seconds"])
        if options["side_effect"] and not options["in_process"]:
            raise CommandError("--side-effect goes with --in-process (--compare runs both phases anyway)")
        if comparing and connection.vendor != "postgresql":
            raise CommandError(f"durable_bench --compare needs Postgres (this database is {connection.vendor}): "
                               "the peers keep their state in Postgres, so all of them must run on the same server. "
                               "Set DATABASE_URL=postgres://... and run it again.")
        try:
            counts = compare.parse_workers_list(workers_list) if comparing else [workers]
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        call_command("migrate", verbosity=0, interactive=False)
        wakeups = options["wakeups"]
        self.probes = (50 if comparing else 0) if wakeups is None else wakeups
        self.wakeups = Wakeups()
        if options["sweeper_at"]:
            from durable.tools.bench import sweeper

            self.stdout.write(f"durable_bench --sweeper-at {options['sweeper_at']:,}")
            self._lines(sweeper.seed_and_time(options["sweeper_at"], keep=keep))
            return
        if options["parked"]:
            from durable.tools.bench import parked

            if connection.vendor != "postgresql":
                raise CommandError("durable_bench --parked seeds with Postgres' generate_series: set DATABASE_URL "
                                   "to a scratch Postgres database")
            self.stdout.write(f"durable_bench --parked {options['parked']:,}")
            self._lines(parked.seed_and_time(options["parked"], keep=keep or options["reuse"], reuse=options["reuse"]))
            return
        if options["parallel"]:
            from durable.tools.bench.parallel import time_parallel

            self._lines(time_parallel(options["parallel"], options["call_ms"] or 50.0, runs))
            return
        if options["resume_with"]:
            from durable.tools.bench.resume import time_resume

            self._lines(time_resume(options["resume_with"]))
            return
        if options["in_process"]:
            self._phases(runs, steps, options["side_effect"], options["loop"])
            return
        # A queue of its own: a running demo worker must not take the benchmark's runs.
        with override_settings(CELERY_TASK_DEFAULT_QUEUE=f"durable-bench-{uuid.uuid4().hex[:8]}"):
            if options["agents"] or options["rate_limit"]:
                self._agents(options, workers, timeout, keep, comparing)
                return
            if options["kill"]:
                self._recovery(options["kill"], keep)
                return
            if options["stream"]:
                self._stream(options["stream"])
                return
            if options["conversation"]:
                self._conversation(options["conversation"], options["turn_bytes"], comparing, timeout, keep,
                                   options["large_bytes"])
                return
            if options["schedules"] > 0:
                self._schedules(options["schedules"], options["schedules_per_second"], timeout, keep)
                return
            if options["events"] or options["timers"]:
                self._waits(options["events"], options["timers"], timer_seconds, options["timers_per_second"],
                            timeout, keep)
                return
            if comparing:
                self._compare(runs, steps, counts, timeout, repeat)
            else:
                self._report(self._bench(runs, steps, counts[0], timeout, keep, loop=options["loop"]), counts[0])
            self._report_wakeups()

    # -- durable alone ------------------------------------------------------------

    def _bench(self, runs: int, steps: int, workers: int, timeout: float, keep: bool,
               side_effect: bool = False, loop: bool = False, pool: str | None = "solo") -> BenchResult:
        workflow = bench_workflow(steps, side_effect=side_effect, loop=loop)
        stats_dir = Path(tempfile.mkdtemp(prefix="durable-bench-"))
        env = {
            "DURABLE_BENCH_STEPS": str(steps), "DURABLE_BENCH_STATS_DIR": str(stats_dir),
            "DURABLE_BENCH_SIDE_EFFECT": "1" if side_effect else "", "DURABLE_BENCH_LOOP": "1" if loop else "",
            "DURABLE_WORKFLOW_MODULES": ",".join([*durable_settings.DURABLE_WORKFLOW_MODULES, "durable.tools.bench.workflows",
                                                  "durable.tools.bench.wakeup"]),
            "DURABLE_TIME_SLICE_SECONDS": "60",
            # The runs wait in a backlog made on purpose before the workers start: a sweeper would send
            # copies of its tail as if their messages were lost. This measures steps, not the sweeper
            # (--sweeper-at times that, --kill the recovery it serves).
            "DURABLE_WORKER_SWEEPS": "false",
        }
        # Runs of an account of its own, and workers scoped to them, on a queue of its own (durable/scope.py).
        account = tool_account("bench")
        env.update(scope_env(account))
        run_ids = _start_runs(workflow, runs, account)
        probed = bool(self.probes and workers == 1 and not side_effect and pool is None)
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        crew = [WorkerProcess(env=env, name=f"bench{i}", log_path=logs / f"bench-worker-{i}.log", pool=pool)
                for i in range(workers)]
        updates_before = run_table_updates()
        try:
            for worker in crew:
                worker.start()
            started = timezone.now()
            for run_id in run_ids:
                dispatch.enqueue(run_id)
            unfinished = wait_for_runs(run_ids, until={RunStatus.SUCCEEDED}, timeout=timeout)
            if unfinished:
                raise CommandError(f"{unfinished} run(s) unfinished after {timeout:.0f}s")
            time.sleep(0.3)  # the last task's stats file is written just after its run's last commit
            result = measure(run_ids, visits_per_run(steps, side_effect), started, stats_dir)  # before the probes add to the counts
            if probed:  # the same worker, idle now
                self.wakeups.add(wakeup.probe(self.probes, account))
        finally:
            for worker in crew:
                worker.stop()
            retire(account)
        if not probed:  # the probes' updates would count too (the workers flush their counts as they exit)
            updates = run_table_updates()
            result.run_updates = (updates[0] - updates_before[0], updates[1] - updates_before[1])
        if not keep:
            delete_runs(run_ids)
            if not probed:
                account.delete()  # nothing left that it created (probe runs stay: see wakeup.probe)
        return result

    def _agents(self, options: dict[str, Any], workers: int, timeout: float, keep: bool, comparing: bool) -> None:
        """--agents N (--compare: and the peers) or --rate-limit R, on real workers against the fake model server."""
        from durable.tools.bench import fleet

        agents, per_second = options["agents"], options["rate_limit"]
        if agents < 0 or per_second < 0:
            raise CommandError("--agents and --rate-limit take a count (0: off)")
        if per_second and comparing:
            raise CommandError("--rate-limit measures durable's named limits alone; run it without --compare")
        if (options["worker_runs"] or 1) < 1 or (options["db_pool_size"] or 1) < 1:
            raise CommandError("--worker-runs and --db-pool-size must be at least 1")
        if connection.vendor != "postgresql":
            raise CommandError("durable_bench --agents and --rate-limit need Postgres: they count its connections "
                               "(pg_stat_activity). Set DATABASE_URL=postgres://... and run it again.")
        env = dict(_name_value(given) for given in options["worker_env"])
        try:
            if per_second:
                self._rate_limit(per_second, agents, options, workers, env, timeout, keep)
                return
            call_ms = options["call_ms"] or 1000.0
            runs_each = options["worker_runs"] or fleet.default_worker_runs(agents, workers)
            crew = fleet.Fleet(workers, options["pool"], runs_each, options["db_pool_size"], env)
            if not comparing:
                result = fleet.measure_agents(agents, call_ms, crew, timeout, keep)
                self.stdout.write(result.line())
                _every_call_once(result)
                return
        except fleet.Stopped as stopped:
            raise CommandError(str(stopped)) from None
        from durable.tools.bench.figures import AgentsResult
        from durable.tools.bench.peers.agents import AGENT_RUNNERS, CALLS, run_agents_peer

        try:  # durable's line says why it was not measured, and the peers are measured all the same
            result = fleet.measure_agents(agents, call_ms, crew, timeout, keep)
            failed = ""
        except fleet.Stopped as stopped:
            failed = str(stopped)
            result = AgentsResult(DURABLE, agents, CALLS, call_ms, workers, note=f"failed: {failed}")
        self.stdout.write(result.line())
        with connection.cursor() as cursor:  # the benchmark's own connection is not the peer's
            cursor.execute("SELECT pg_backend_pid()")
            own = [cursor.fetchone()[0]]
        for system in AGENT_RUNNERS:
            self.stdout.write(run_agents_peer(system, agents, call_ms, workers, runs_each, database_url(),
                                              timeout=timeout, own_backends=own).line())
        if failed:
            raise CommandError(f"durable was not measured: {failed}")
        _every_call_once(result)

    def _rate_limit(self, per_second: int, runs: int, options: dict[str, Any], workers: int, env: dict[str, str],
                    timeout: float, keep: bool) -> None:
        from durable.tools.bench import fleet, ratelimit

        runs = runs or ratelimit.default_runs(per_second)
        crew = fleet.Fleet(workers, options["pool"], options["worker_runs"] or fleet.default_worker_runs(runs, workers),
                           options["db_pool_size"], env)
        self.stdout.write(ratelimit.measure_rate_limit(per_second, runs, options["call_ms"] or 100.0, crew,
                                                       timeout, keep).line())

    def _stream(self, runs: int) -> None:
        from durable.tools.bench import stream

        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        self.stdout.write(f"durable_bench --stream {runs}: database {connection.vendor}, broker "
                          f"{settings.CELERY_BROKER_URL.split('://')[0]}")
        self._lines(stream.measure(runs, logs).lines())

    def _conversation(self, turns: int, turn_bytes: int, comparing: bool, timeout: float, keep: bool,
                      large_bytes: int = 0) -> None:
        from durable.tools.bench import conversation
        from durable.tools.bench.peers.conversation import run_conversation_peer

        if turns < conversation.ENDS * 2 or turn_bytes < 1 or large_bytes < 0:
            raise CommandError(f"--conversation takes at least {conversation.ENDS * 2} turns, --turn-bytes at least 1, "
                               "--large-bytes 0 (none) or more")
        account = tool_account("bench-conversation")
        env, logs = _worker_env(account, "durable.tools.bench.conversation")
        self.stdout.write(f"durable_bench --conversation {turns} --turn-bytes {turn_bytes}: one run, one real worker, "
                          f"database {connection.vendor}; the conversation is {turns * turn_bytes / 1e6:.2f} MB")
        if large_bytes:
            self._conversation_large(turns, turn_bytes, large_bytes, (account, env, logs), timeout, keep)
            return
        try:
            cost, _ = conversation.measure(turns, turn_bytes, env, account, logs, timeout)
        finally:
            retire(account)
            if not keep:
                delete_runs(list(Run.objects.filter(created_by=account).values_list("id", flat=True)))
        self.stdout.write(cost.line())
        if comparing:
            for system in (compare.LANGGRAPH, compare.DBOS):
                self.stdout.write(run_conversation_peer(system, turns, turn_bytes, database_url(), timeout).line())

    def _conversation_large(self, turns: int, turn_bytes: int, large_bytes: int, worker: tuple[Any, dict[str, str], Path],
                            timeout: float, keep: bool) -> None:
        """The conversation whose turns each carry the same tool result of `large_bytes`: stored once, then inline."""
        from durable.tools.bench import conversation

        account, env, logs = worker
        self.stdout.write(f"  each turn also carries the same tool result of {large_bytes / 1e3:,.0f} KB (a recorded "
                          f"activity, appended to the conversation)")
        try:
            for system, threshold in (("durable, stored once", None), ("durable, inline (0)", "0")):
                worker_env = env if threshold is None else {**env, "DURABLE_LARGE_VALUE_BYTES": threshold}
                cost, _ = conversation.measure(turns, turn_bytes, worker_env, account, logs, timeout,
                                               large_bytes=large_bytes, system=system)
                self.stdout.write(cost.line())
        finally:
            retire(account)
            if not keep:
                delete_runs(list(Run.objects.filter(created_by=account).values_list("id", flat=True)))

    def _recovery(self, kills: int, keep: bool) -> None:
        from durable.tools.bench import recovery

        account = tool_account("bench-recovery")
        env, logs = _worker_env(account, "durable.tools.bench.recovery")
        self.stdout.write(f"durable_bench --kill {kills}: database {connection.vendor}, broker "
                          f"{settings.CELERY_BROKER_URL.split('://')[0]}")
        try:
            found = recovery.measure(kills, env, account, logs)
        finally:
            retire(account)
            run_ids = list(Run.objects.filter(created_by=account).values_list("id", flat=True))
            if not keep:
                delete_runs(run_ids)
        self._lines(found.lines(durable_settings.DURABLE_LEASE_SECONDS, durable_settings.DURABLE_SWEEP_SECONDS))

    def _waits(self, events: int, timers: int, timer_seconds: tuple[float, float], per_second: float,
               timeout: float, keep: bool) -> None:
        from durable.tools.bench import waits

        account = tool_account("bench-waits")
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        self.stdout.write(f"durable_bench waits: database {connection.vendor}, broker "
                          f"{settings.CELERY_BROKER_URL.split('://')[0]}, each step notes the wall clock as it runs on")
        try:
            with waits.worker(account, logs):
                if events:  # these runs stay, as the wake-up probes' do: each event sent is audited
                    self._lines(waits.events(events, account, timeout).lines())
                if timers:
                    self._lines(waits.timers(timers, account, timeout, *timer_seconds, per_second=per_second).lines())
        finally:
            retire(account)
            if not keep:
                delete_runs(list(Run.objects.filter(created_by=account, workflow_name=waits.TIMER_WORKFLOW)
                                 .values_list("id", flat=True)))

    def _schedules(self, count: int, per_second: float, timeout: float, keep: bool) -> None:
        from durable.tools.bench import schedules

        account = tool_account("bench-schedules")
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        try:
            with schedules.worker(account, logs):
                self._lines(schedules.fire(count, account, timeout, per_second))
        finally:
            retire(account)
            if not keep:
                schedules.forget(account)
                delete_runs(list(Run.objects.filter(created_by=account).values_list("id", flat=True)))

    def _phases(self, runs: int, steps: int, side_effect: bool, loop: bool) -> None:
        workflow = bench_workflow(steps, side_effect=side_effect, loop=loop)
        visits = visits_per_run(steps, side_effect)
        report, _ = _advance_in_process(workflow, runs, visits)
        shape = f"{visits} step visits ({steps} of one step looping)" if loop else f"{visits} steps"
        with_effect = " (one of them with a side effect)" if side_effect else ""
        self.stdout.write(f"durable_bench --in-process: {runs} runs x {shape}{with_effect} "
                          f"advanced one after another in this process, database {connection.vendor}")
        self._lines(report.lines())

    def _report(self, r: BenchResult, workers: int) -> None:
        broker = settings.CELERY_BROKER_URL.split("://")[0]
        self.stdout.write(f"durable_bench: {r.runs} runs x {r.steps // r.runs} steps, {workers} worker(s), "
                          f"database {connection.vendor}, broker {broker}")
        self.stdout.write(f"  wall time            {r.seconds:.2f} s")
        self.stdout.write(f"  workflows/s          {r.workflows_per_second:.1f}")
        self.stdout.write(f"  steps/s              {r.steps_per_second:.1f}")
        self.stdout.write(f"  per-step p50 / p99   {r.step_p50_ms:.2f} ms / {r.step_p99_ms:.2f} ms")
        self.stdout.write(f"  SQL commits          {r.commits} = {r.commits_per_step:.2f} per step "
                          f"(incl. one lease claim per task)")
        self.stdout.write(f"  advance tasks        {r.advance_tasks} = {r.advance_tasks / r.runs:.2f} per run "
                          f"(broker messages per step: {r.advance_tasks / r.steps:.3f})")
        updated, hot = r.run_updates
        if updated:
            self.stdout.write(f"  durable_run updates  {updated}, {hot / updated:.0%} heap-only (HOT; pg_stat_user_tables)")
        self.stdout.write(f"  CPU per 1,000 steps  worker {r.worker_cpu_per_1000_steps:.2f} s, Postgres backends "
                          f"{r.backend_cpu_per_1000_steps:.2f} s (/proc, from each worker's first task)")

    def _report_wakeups(self) -> None:
        if self.probes:
            self.stdout.write("\nwake-up latency, 1 idle worker, broker " + settings.CELERY_BROKER_URL.split("://")[0] +
                              " (each step notes its start; all probes of all repeats)")
            self._lines(self.wakeups.lines())

    # -- durable beside its peers ---------------------------------------------------

    def _compare(self, runs: int, steps: int, counts: list[int], timeout: float, repeat: int) -> None:
        broker = settings.CELERY_BROKER_URL.split("://")[0]
        self.stdout.write(f"durable_bench --compare: {runs} workflows x {steps} steps, Postgres "
                          f"{connection.settings_dict['HOST'] or 'localhost'}/{connection.settings_dict['NAME']}, "
                          f"broker {broker}, median of {repeat} run(s) per row")
        self.stdout.write(HOW_MEASURED)
        scaling: dict[int, SystemResult] = {}
        for side_effect in (False, True):
            workload = Workload(runs, steps, side_effect, database_url())
            rows = [self._durable(workload, 1, timeout, repeat),
                    self._durable(workload, 1, timeout, repeat, pool="solo"),
                    self._median(partial(self._in_process, workload), repeat)]
            if not side_effect:
                scaling[1] = rows[0]
            rows += [self._median(partial(run_peer, system, workload, timeout=timeout), repeat) for system in RUNNERS]
            title = (f"(b) {steps} trivial steps + 1 side effect (in-process downstream, idempotency key) per workflow"
                     if side_effect else f"(a) {steps} trivial steps per workflow")
            self.stdout.write(f"\n{title}; durable with 1 worker process")
            self._lines(compare.comparison_table(rows) + ["  goals:"] + compare.goal_lines(rows, side_effect))
        for workers in counts:
            if workers not in scaling:
                scaling[workers] = self._durable(Workload(runs, steps, False, ""), workers, timeout, repeat)
        self.stdout.write(f"\nscaling: durable, {steps} trivial steps per workflow, worker processes on "
                          "this machine")
        self._lines(compare.scaling_table({w: scaling[w] for w in counts}))

    def _durable(self, workload: Workload, workers: int, timeout: float, repeat: int,
                 pool: str | None = None) -> SystemResult:
        """durable on `workers` real workers: the documented command's pool (None), or `pool`."""
        def once() -> SystemResult:
            r = self._bench(workload.runs, workload.steps, workers, timeout, keep=False,
                            side_effect=workload.side_effect, pool=pool)
            return SystemResult(DURABLE if pool is None else DURABLE_SOLO, r.steps, r.seconds, r.step_p50_ms, r.step_p99_ms,
                                worker_cpu_per_1000=r.worker_cpu_per_1000_steps,
                                backend_cpu_per_1000=r.backend_cpu_per_1000_steps)

        return self._median(once, repeat)

    @staticmethod
    def _in_process(workload: Workload) -> SystemResult:
        """durable's engine as the peers run: workflows one after another in this process, no broker."""
        workflow = bench_workflow(workload.steps, side_effect=workload.side_effect)
        report, intervals = _advance_in_process(workflow, workload.runs,
                                                visits_per_run(workload.steps, workload.side_effect))
        return compare.from_intervals(DURABLE_IN_PROCESS, steps=report.steps, seconds=report.seconds,
                                      intervals_ms=intervals, cpu=report.cpu)

    @staticmethod
    def _median(measure_once: Callable[[], SystemResult], repeat: int) -> SystemResult:
        return compare.median_result([measure_once() for _ in range(repeat)])

    def _lines(self, lines: list[str]) -> None:
        for line in lines:
            self.stdout.write(line)


def _every_call_once(result: Any) -> None:
    """durable makes each model call of a run once: a duplicate or a missing call fails the benchmark, after its line."""
    if result.duplicates or result.missing:
        raise CommandError(f"durable made {result.duplicates} duplicate and {result.missing} missing model calls "
                           f"of {result.runs * result.calls}")


def _name_value(given: str) -> tuple[str, str]:
    name, equals, value = given.partition("=")
    if not equals or not name.strip():
        raise CommandError(f"--worker-env takes NAME=VALUE, not {given!r}")
    return name.strip(), value


def _seconds_range(given: str) -> tuple[float, float]:
    try:
        shortest, longest = (float(part) for part in given.split(","))
    except ValueError:
        raise CommandError(f"--timer-seconds takes SHORTEST,LONGEST in seconds (e.g. 0.2,6), not {given!r}") from None
    if not 0 <= shortest <= longest:
        raise CommandError(f"--timer-seconds: need 0 <= SHORTEST <= LONGEST, got {given!r}")
    return shortest, longest


def _start_runs(workflow: Workflow, count: int, account: User | None = None) -> list[UUID]:
    return [services.start_run(workflow=workflow.name, input={}, business_key=f"bench-{i}", enqueue=False,
                               user=account)[0].id for i in range(count)]


def _advance_in_process(workflow: Workflow, runs: int, visits: int) -> tuple[PhaseReport, list[float]]:
    """Advance `runs` runs in this process, after a few untimed ones (connections, caches, lazy
    imports); the phases and the per-step intervals, and no runs left behind."""
    warmup = min(20, runs)
    run_ids = _start_runs(workflow, warmup + runs)
    logging.disable(logging.INFO)  # a line per side effect on this console; a worker writes them to its log file
    try:
        time_phases(run_ids[:warmup], visits)
        timed = run_ids[warmup:]
        return time_phases(timed, visits), step_intervals_ms(timed)
    finally:
        logging.disable(logging.NOTSET)
        delete_runs(run_ids)


def _worker_env(account: Any, workflows: str) -> tuple[dict[str, str], Path]:
    """A benchmark worker's environment (its account's scope, the module registering its workflows), and where
    its log goes."""
    env = {**scope_env(account), "DURABLE_WORKFLOW_MODULES": ",".join(
        [*durable_settings.DURABLE_WORKFLOW_MODULES, workflows])}
    logs = settings.VAR_DIR / "logs"
    logs.mkdir(exist_ok=True)
    return env, logs
