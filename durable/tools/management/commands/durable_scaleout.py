"""The scale-out test: W workers and N web processes on Postgres and a broker, random crashes, every message twice."""
from __future__ import annotations

import os
import signal
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.tools import scaleout


class Command(BaseCommand):
    help = ("Start runs through N gunicorn processes, advance them with W Celery workers that crash at random "
            "fault points and receive every message twice, and fail if anything took effect twice, a run was "
            "lost, or a run ended anywhere but where its crashes say.")

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = scaleout.ScaleOutConfig()
        parser.add_argument("--runs", type=int, default=defaults.runs)
        parser.add_argument("--workers", type=int, default=defaults.workers)
        parser.add_argument("--web", type=int, default=defaults.web, help="gunicorn processes, one port each")
        parser.add_argument("--fault-rate", type=float, default=defaults.fault_rate,
                            help="chance that each fault point crashes the worker, per operation")
        parser.add_argument("--transient-per-second", type=float, default=defaults.transient_per_second,
                            help="429/503 answers armed at random on the downstreams, per second")
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--broker", default=os.environ.get("DURABLE_SCALEOUT_BROKER_URL", defaults.broker_url),
                            help="the workers' and web processes' broker (default RabbitMQ on 127.0.0.1:5672)")
        parser.add_argument("--timeout", type=float, default=defaults.timeout)
        parser.add_argument("--keep", action="store_true", help="keep the runs even when the test passes")

    def handle(self, *args: Any, runs: int, workers: int, web: int, fault_rate: float, transient_per_second: float,
               seed: int, broker: str, timeout: float, keep: bool, **_: Any) -> None:
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        config = scaleout.ScaleOutConfig(runs=runs, workers=workers, web=web, fault_rate=fault_rate,
                                         transient_per_second=transient_per_second, seed=seed, broker_url=broker,
                                         timeout=timeout, log_dir=logs)
        try:
            scaleout.validate(config)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        call_command("migrate", verbosity=0, interactive=False)
        # SIGTERM unwinds like Ctrl-C, so the web and worker processes it started are stopped too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        result = scaleout.run_scaleout(config, progress=self.stdout.write)
        self.stdout.write(scaleout.report(result))
        if not result.ok:
            raise CommandError(f"the scale-out test found violations; its runs are kept, process logs in {logs}")
        if not keep:
            scaleout.forget(result)
