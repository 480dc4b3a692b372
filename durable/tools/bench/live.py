"""What live console screens cost the server: N open consoles polling a run's page through a real gunicorn.

Each simulated console is one thread holding a logged-in session that asks the way live.js does: an htmx GET
of the page every interval, with the version it shows as If-None-Match. The "unchanged" phase is answered
304 throughout; the "changed" phase sends no version, so every poll renders the region (200), the cost of
a screen whose state changes at every poll. Server CPU is read from /proc for gunicorn's processes before
and after each phase, so it is the server's own time (Python, the ORM, the database driver), not the
clients'. Queries per poll are counted in-process with Django's test client. The tool makes its own user
and run (a `bench-live-` business key) and deletes them afterwards.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from durable import services
from durable.models import Run
from durable.permissions import Person

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Phase:
    name: str
    polls: int
    seconds: float
    statuses: dict[int, int]
    cpu_seconds: float  # gunicorn's processes, user + system
    p50_ms: float
    p95_ms: float

    @property
    def per_second(self) -> float:
        return self.polls / self.seconds

    @property
    def cpu_ms_per_poll(self) -> float:
        return 1000 * self.cpu_seconds / self.polls


@dataclass(frozen=True)
class Report:
    consoles: int
    interval: float
    workers: int
    phases: list[Phase]
    queries: dict[int, int]  # status -> database queries per poll

    def lines(self) -> list[str]:
        out = [f"{self.consoles} consoles polling a run's page every {self.interval:g} s, gunicorn with "
               f"{self.workers} sync workers:"]
        for phase in self.phases:
            codes = ", ".join(f"{code}: {count}" for code, count in sorted(phase.statuses.items()))
            out.append(f"  {phase.name}: {phase.per_second:.1f} polls/s ({codes}); server CPU "
                       f"{phase.cpu_ms_per_poll:.2f} ms a poll; latency p50 {phase.p50_ms:.1f} ms, "
                       f"p95 {phase.p95_ms:.1f} ms")
        out.append("  database queries a poll: " + ", ".join(f"{code}: {n}" for code, n in sorted(self.queries.items())))
        return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def server_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [master, *map(int, children)]


def start_gunicorn(port: int, workers: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gunicorn", "durable.project.wsgi", "--workers", str(workers),
               "--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
    # Plain HTTP on the loopback: no redirect to https (TLS is the proxy's, and not what is measured here).
    server = subprocess.Popen(command, cwd=settings.BASE_DIR, env={**os.environ, "DURABLE_SSL_REDIRECT": "0"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=1)
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError("gunicorn did not answer within 30 s")


def poller(url: str, cookie: str, version: str | None, until: float, interval: float, offset: float,
           results: list[tuple[int, float]]) -> None:
    headers = {"HX-Request": "true", "Cookie": cookie}
    if version:
        headers["If-None-Match"] = version
    time.sleep(offset)  # consoles opened at different moments: polls spread over the interval
    while time.monotonic() < until:
        started = time.monotonic()
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                answer.read()
                status = answer.status
        except urllib.error.HTTPError as refused:  # urllib reports a 304 as an error
            status = refused.code
        results.append((status, 1000 * (time.monotonic() - started)))
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def phase(name: str, url: str, cookies: list[str], version: str | None, seconds: float, interval: float,
          pids: list[int]) -> Phase:
    results: list[tuple[int, float]] = []
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=poller, args=(url, cookie, version, until, interval,
                                                     interval * n / len(cookies), results))
               for n, cookie in enumerate(cookies)]
    before, started = cpu_seconds(pids), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, used = time.monotonic() - started, cpu_seconds(pids) - before
    statuses: dict[int, int] = {}
    for status, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    times = sorted(ms for _, ms in results)
    return Phase(name, len(results), elapsed, statuses, used, statistics.median(times),
                 times[int(0.95 * (len(times) - 1))])


def queries_per_poll(user: Person, url: str, version: str) -> dict[int, int]:
    client = Client()
    client.force_login(user)
    counted = {}
    for sent in (version, None):
        headers: dict[str, Any] = {"HTTP_IF_NONE_MATCH": sent} if sent else {}
        with CaptureQueriesContext(connection) as queries:
            status = client.get(url, secure=True, HTTP_HX_REQUEST="true", **headers).status_code
        counted[status] = len(queries.captured_queries)
    return counted


def sessions(user: Person, count: int) -> list[str]:
    cookies = []
    for _ in range(count):
        client = Client()
        client.force_login(user)
        cookies.append(f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}")
    return cookies


def run(*, consoles: int, seconds: float, interval: float, workers: int, port: int) -> Report:
    """Measure both phases against a gunicorn of its own; everything it made is deleted at the end."""
    user = get_user_model().objects.create_user(f"bench-live-{uuid.uuid4().hex[:8]}")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="durable", codename="view_run"))
    run_, _ = services.start_run(workflow="claims-agent", business_key=f"bench-live-{uuid.uuid4().hex[:8]}",
                                 enqueue=False, user=user, input={"order_id": "ORD-1001", "customer_message": "x"})
    try:
        path = reverse("durable:run-detail", args=[run_.id])
        client = Client()
        client.force_login(user)
        version = client.get(path, secure=True)["ETag"]
        cookies = sessions(user, consoles)
        server = start_gunicorn(port, workers)
        try:
            pids, url = server_pids(server.pid), f"http://127.0.0.1:{port}{path}"
            phases = [phase("unchanged (304)", url, cookies, version, seconds, interval, pids),
                      phase("changed (200)", url, cookies, None, seconds, interval, pids)]
        finally:
            server.terminate()
            server.wait(10)
        return Report(consoles, interval, workers, phases, queries_per_poll(user, path, version))
    finally:
        Run.objects.filter(id=run_.id).delete()
        user.delete()
