"""Starting and stopping real worker processes: for the demo launcher, the benchmark and tests."""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from durable.conf import durable_settings

DRILL_SETTINGS = "durable.tools.drill_settings"  # the settings a host's drill runs under (see that module)


def database_url() -> str:
    """The URL of the database this process uses now (the test database inside tests)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment for a child: the same database, broker, queue and sandbox."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DURABLE_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "DURABLE_VAR_DIR": str(var_dir()),
        "DURABLE_SANDBOX_URL": durable_settings.DURABLE_SANDBOX_URL,
        "DURABLE_WORKFLOW_MODULES": ",".join(durable_settings.DURABLE_WORKFLOW_MODULES),
        "SECRET_KEY": settings.SECRET_KEY,
        **extra,
    }


def var_dir() -> Path:
    """Where this project keeps its files: the standalone project's VAR_DIR; a host's temporary directory."""
    return Path(getattr(settings, "VAR_DIR", None) or tempfile.gettempdir())


def project_dir() -> Path:
    """Where this project's processes start (its manage.py): BASE_DIR, or the working directory."""
    return Path(getattr(settings, "BASE_DIR", None) or os.getcwd())


def settings_module() -> str:
    """This project's own settings module (a drill's process names the one it wraps: durable.tools.drill_settings)."""
    # The environment's, not settings.SETTINGS_MODULE: inside override_settings that one is None.
    module = os.environ.get("DJANGO_SETTINGS_MODULE") or settings.SETTINGS_MODULE
    return os.environ.get("DURABLE_DRILL_SETTINGS", module) if module == DRILL_SETTINGS else module


def celery_app() -> str:
    """What `celery -A` names for this project: the package its settings live in (durable.project, a host's
    `host`), where Django's and Celery's layout put the Celery app."""
    module = settings_module()
    return module.rpartition(".")[0] or module


def announce_ready(**_: object) -> None:
    """A worker consumes: say so in the file DURABLE_WORKER_READY_FILE names, so that a supervisor (the demo
    launcher, the drill, the benchmark, tests) waits for a worker that really consumes, on any broker."""
    path = os.environ.get("DURABLE_WORKER_READY_FILE")
    if path:
        with open(path, "w") as ready:
            ready.write(str(os.getpid()))


class ChildProcess:
    """A process this one started: stopped politely, or killed as a crash would."""

    process: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no ack, no lease release. A crash."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


class WorkerProcess(ChildProcess):
    """One `celery worker` process consuming durable's queue, with the solo pool by default (`pool=None`: the
    project's own, the threads pool with DURABLE_WORKER_RUNS threads, as the documented command starts it).

    With the solo pool the process that takes a task runs it, so killing it kills the run
    mid-step: what a crash or an OOM kill does in production. The fault drill asks for the
    prefork pool instead: a pool child that crashes is replaced by the master in milliseconds,
    where a dead solo worker would need a whole restart.
    """

    def __init__(self, *, env: dict[str, str] | None = None, beat: bool = False, log_path: Path | None = None,
                 name: str = "worker", pool: str | None = "solo", concurrency: int = 1, die_with_parent: bool = False) -> None:
        self.env = env or {}
        self.die_with_parent = die_with_parent
        self.beat = beat
        self.name = name
        self.pool = pool
        self.concurrency = concurrency
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._ready = Path(tempfile.mkdtemp(prefix="durable-worker-")) / "ready"

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "celery", "-A", celery_app(), "worker", "--loglevel=WARNING",
            "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-n", f"{self.name}-{os.getpid()}-{id(self)}@%h",
        ]
        if self.pool is not None:
            cmd.append(f"--pool={self.pool}")
        if self.pool not in ("solo", None):  # the solo pool has no children to count; None: the settings say
            cmd.append(f"--concurrency={self.concurrency}")
        if self.beat:
            cmd += ["--beat", "--schedule", str(var_dir() / f"celerybeat-{self.name}")]
        return cmd

    def child_env(self) -> dict[str, str]:
        return child_environment({"DURABLE_WORKER_READY_FILE": str(self._ready), **self.env})

    def start(self, timeout: float = 60.0) -> WorkerProcess:
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting for it to consume. With `die_with_parent`, the kernel kills it when
        the thread that launched it ends (Linux's parent-death signal): a tool killed mid-way leaves no worker."""
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            self.command(), env=self.child_env(), cwd=project_dir(), stdout=output, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.exists():
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited before it was ready (see {self.log_path or 'its output'})")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"celery worker not ready after {timeout:.0f}s; is the broker "
                                   f"{settings.CELERY_BROKER_URL.split('@')[-1]} reachable?")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """In the child, before it runs the worker: be killed when the thread that started it ends (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: a tool killed mid-way leaves its workers, as before
        pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class WebProcess(ChildProcess):
    """One gunicorn process serving durable on a port of its own: a web machine in miniature."""

    def __init__(self, *, env: dict[str, str] | None = None, log_path: Path | None = None, workers: int = 1,
                 host: str = "127.0.0.1") -> None:
        self.env = env or {}
        self.log_path = log_path
        self.workers = workers
        self.host = host
        self.port = free_port(host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "gunicorn", "durable.project.wsgi", "-c", str(settings.BASE_DIR / "gunicorn.conf.py"),
                "--bind", f"{self.host}:{self.port}", "--workers", str(self.workers), "--log-level", "warning"]

    def start(self, timeout: float = 60.0) -> WebProcess:
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        env = child_environment({"ALLOWED_HOSTS": self.host, "DURABLE_HTTPS": "false", **self.env})
        self.process = subprocess.Popen(self.command(), env=env, cwd=settings.BASE_DIR, stdout=output,
                                        stderr=subprocess.STDOUT)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited before it answered (see {self.log_path or 'its output'})")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"gunicorn not answering on {self.url} after {timeout:.0f}s") from None
                time.sleep(0.1)
