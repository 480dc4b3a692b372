"""A tiny stand-in for the shop's refunds service, over real HTTP, counting every call.

Refunds honour the Idempotency-Key (a repeated key gets the first refund back). A notice for an
order in `lose_answer_for` is taken and recorded, then the connection is closed without an
answer: the client cannot know it happened, which is what makes an operation UNKNOWN.
"""
from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ShopState:
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)  # by Idempotency-Key
    refund_calls: list[str] = field(default_factory=list)  # the key of every refund request
    notices: list[dict[str, Any]] = field(default_factory=list)  # every notice taken, answered or not
    lose_answer_for: set[str] = field(default_factory=set)

    def add_order(self, order_id: str, amount: str, currency: str = "EUR") -> None:
        self.orders[order_id] = {"order_id": order_id, "amount": amount, "currency": currency, "refunded": False}


class ShopService:
    def __init__(self) -> None:
        self.state = ShopState()
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ShopService:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                order = service.state.orders.get(self.path.removeprefix("/orders/"))
                self._answer(200, order) if order else self._answer(404, {"detail": "no such order"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                key = self.headers.get("Idempotency-Key", "")
                with service.lock:
                    if self.path == "/refunds":
                        self._refund(key, body)
                    elif self.path == "/notices":
                        self._notice(key, body)
                    else:
                        self._answer(404, {"detail": "no such endpoint"})

            def _refund(self, key: str, body: dict[str, Any]) -> None:
                state = service.state
                state.refund_calls.append(key)
                if key not in state.refunds:  # a repeated key is the same refund, never a second one
                    state.refunds[key] = {"refund_id": f"rf-{len(state.refunds) + 1}", **body}
                    state.orders[body["order_id"]]["refunded"] = True
                self._answer(201, state.refunds[key])

            def _notice(self, key: str, body: dict[str, Any]) -> None:
                state = service.state
                notice = {"notice_id": f"ntc-{len(state.notices) + 1}", "key": key, **body}
                state.notices.append(notice)
                if body.get("order_id") in state.lose_answer_for:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # sent, done, and the answer is lost
                    return
                self._answer(201, notice)

        return Handler
