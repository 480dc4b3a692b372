"""Command line entry point: run the sandbox services until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import signal
import threading

from durable.tools.sandbox.server import SandboxServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m durable.tools.sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--hang-seconds", type=float, default=30.0,
                        help="how long a 'hang' fault holds a request before dropping it")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_requested = threading.Event()
    # Turn both signals into a clean stop, so the port is released and the exit code is 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_requested.set())
    server = SandboxServer(host=args.host, port=args.port, hang_seconds=args.hang_seconds).start()
    # Exactly one line, flushed: scripts wait for it and parse the URL out of it.
    print(f"durable sandbox listening on {server.url}", flush=True)
    try:
        # Timed waits keep the main thread responsive to signals on every platform.
        while not stop_requested.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
