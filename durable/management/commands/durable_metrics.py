"""Serve this machine's shared metrics directory to Prometheus where no web process runs."""
from __future__ import annotations

from typing import Any
from wsgiref.simple_server import WSGIServer, make_server

from django.core.management.base import BaseCommand, CommandParser
from prometheus_client import make_wsgi_app

from durable import metrics


def metrics_server(addr: str, port: int) -> WSGIServer:
    """An HTTP server answering every path with the counters of every process on this machine.

    Only the counters: gauges read from the database come from /metrics on the web
    processes, so that they are not reported once per worker machine.
    """
    metrics.declare_known_series()
    return make_server(addr, port, make_wsgi_app(metrics.shared_registry()))


class Command(BaseCommand):
    help = ("Serve the counters of this machine's worker processes for Prometheus (for machines that run "
            "workers but no web process: the web's /metrics only sees its own machine's directory).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
        parser.add_argument("--port", type=int, default=9464)

    def handle(self, *args: Any, addr: str, port: int, **_: Any) -> None:
        server = metrics_server(addr, port)
        self.stdout.write(f"serving {metrics.directory()} at http://{addr}:{server.server_port}/metrics (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
