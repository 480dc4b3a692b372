"""Start the embedded demo: console, a worker (which sweeps too: no beat), and the sandbox downstreams."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from durable import metrics, services
from durable.conf import durable_settings
from durable.tools.demo import commands
from durable.tools.demo.setup import DEMO_PASSWORD, DEMO_USERNAME, REVIEWER_USERNAME, ensure_demo_people
from durable.tools.processes import WorkerProcess


class Command(BaseCommand):
    help = "Migrate, load the demo, and run the console, a worker and the sandbox until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--sandbox-port", type=int, default=8765)
        parser.add_argument("--no-example-run", action="store_true",
                            help="don't start the example claims-agent and support-agent runs")

    def handle(self, *args: Any, host: str, port: int, sandbox_port: int, no_example_run: bool, **_: Any) -> None:
        call_command("migrate", verbosity=0, interactive=False)
        metrics.clear_directory()  # every process that counts into it starts below: begin at zero
        people = ensure_demo_people()
        settings.DURABLE_SANDBOX_URL = f"http://127.0.0.1:{sandbox_port}"
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        children: list[subprocess.Popen[bytes]] = []
        # As the docs start one: the project's threads pool (DURABLE_WORKER_RUNS runs at once); it sweeps too.
        worker = WorkerProcess(log_path=logs / "worker.log", pool=None)
        try:
            children.append(self._spawn([sys.executable, "-m", "durable.tools.sandbox", "--port", str(sandbox_port)],
                                        logs / "sandbox.log"))
            worker.start()
            children.append(self._spawn([sys.executable, "manage.py", "runserver", f"{host}:{port}", "--noreload",
                                         "--insecure"], logs / "web.log"))
            if not no_example_run:
                services.start_run(workflow="claims-agent", business_key="ORD-1001", user=people.intake,
                                   input={"order_id": "ORD-1001", "customer_message": "Please refund ORD-1001, it arrived broken."})
                support = commands.support_body(commands.SUPPORT_EXAMPLE)  # a tool-calling loop that asks for a refund
                services.start_run(workflow=support["workflow"], business_key=support["business_key"],
                                   user=people.intake, input=support["input"])
            self._announce(host, port, people.intake_token, logs)
            self._wait(children, worker)
        finally:
            worker.stop()
            for child in children:
                if child.poll() is None:
                    child.terminate()
                    child.wait(10)

    def _spawn(self, cmd: list[str], log: os.PathLike[str]) -> subprocess.Popen[bytes]:
        env = {**os.environ, "DURABLE_SANDBOX_URL": durable_settings.DURABLE_SANDBOX_URL}
        return subprocess.Popen(cmd, cwd=settings.BASE_DIR, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)

    def _announce(self, host: str, port: int, token: str, logs: os.PathLike[str]) -> None:
        url = f"http://{host}:{port}/"
        self.stdout.write(self.style.SUCCESS(f"\ndurable is running at {url}"))
        self.stdout.write(f"  log in as:   {DEMO_USERNAME} / {DEMO_PASSWORD}  (second approver: "
                          f"{REVIEWER_USERNAME} / {DEMO_PASSWORD})")
        self.stdout.write(f"  approvals:   {url}approvals/  (the example runs, claims-agent and support-agent, wait "
                          "there for your approval)")
        self.stdout.write(f"  API token:   {token}  (the intake service: starts runs, cannot approve them)")
        self.stdout.write("  start runs:  paste these lines into a shell (the README's walkthrough uses them)")
        self.stdout.write(f"    {commands.token_command(token)}")
        for order_id in commands.CLAIMS:
            self.stdout.write(f"    {commands.start_command(url, order_id)}")
        for order_id in commands.SUPPORT:
            if order_id != commands.SUPPORT_EXAMPLE:
                self.stdout.write(f"    {commands.support_command(url, order_id)}")
        self.stdout.write("  reply:       the customer's answer to the support agent's question (ORD-1005's run waits "
                          "for it), as the support desk's webhook sends it")
        for order_id in commands.REPLY:
            self.stdout.write(f"    {commands.reply_command(url, order_id)}")
        self.stdout.write(f"  logs:        {logs}/  (Ctrl-C stops everything)\n")

    def _wait(self, children: list[subprocess.Popen[bytes]], worker: WorkerProcess) -> None:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while all(c.poll() is None for c in children) and worker.process and worker.process.poll() is None:
                time.sleep(0.5)
            self.stderr.write("a demo process exited; see the logs above. Stopping.")
        except KeyboardInterrupt:
            self.stdout.write("stopping")
