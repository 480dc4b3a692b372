"""A webhook receiver over real HTTP, as a team would write one: it checks the signature, and processes each
Durable-Delivery-Id once (a repeat is answered 200 and dropped), recording every request it got."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durable.engine.notifications import DELIVERY_ID_HEADER, SIGNATURE_HEADER, verify


class Receiver:
    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # every request, repeats included
        self.processed: Counter[str] = Counter()  # what the receiver acted on, by delivery id
        self.answers: list[int] = []  # scripted statuses for the next requests; then 200
        self.bodies: list[bytes] = []  # scripted bodies for the next answers; then none
        self.hold_first = threading.Event()  # set: the first request waits until released
        self.released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                receiver.handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/durable"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers["Content-Length"]))
        delivery_id = request.headers[DELIVERY_ID_HEADER]
        signed = verify(self.secret, request.headers.get(SIGNATURE_HEADER, ""), body, now=int(time.time()))
        with self.lock:
            first = not self.requests
            self.requests.append({"delivery_id": delivery_id, "signed": signed, "body": json.loads(body)})
            status = self.answers.pop(0) if self.answers else 200
            answer = self.bodies.pop(0) if self.bodies else b""
            if signed and status == 200 and not self.processed[delivery_id]:
                self.processed[delivery_id] += 1  # acted on, then answered: a repeat of it is dropped
        if first and self.hold_first.is_set():
            self.released.wait(60)  # the sender is killed meanwhile; nobody reads the answer
        try:
            request.send_response(status)
            request.send_header("Content-Length", str(len(answer)))
            request.end_headers()
            request.wfile.write(answer)
        except OSError:
            pass  # the sender is gone

    def seen(self, delivery_id: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r["delivery_id"] == delivery_id)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
