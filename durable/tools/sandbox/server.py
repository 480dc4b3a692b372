"""HTTP face of the sandbox: request routing, the fake services, fault injection and the SandboxServer lifecycle."""

from __future__ import annotations

import json
import re
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from durable.tools.demo.support_model import ScriptedSupportModel, assistant_message
from durable.tools.sandbox.state import SandboxError, SandboxState, require_text

MAX_BODY_BYTES = 1_000_000
ORDER_ID_PATTERN = re.compile(r"ORD-\d+")


class _DropConnection(Exception):
    """Raised by a fault to close the socket without writing any response."""


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    """One parsed request, as the service functions see it."""

    state: SandboxState
    params: dict[str, str]
    query: dict[str, list[str]]
    idempotency_key: str | None
    raw_body: bytes
    _parsed: Any = field(init=False, default=None)
    _error: SandboxError | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # Parse eagerly but raise lazily: a faulted call must still be counted (with its business
        # key when the body is valid) before a malformed body turns into a 400.
        if not self.raw_body.strip():
            self._parsed = {}
            return
        try:
            self._parsed = json.loads(self.raw_body)
        except (ValueError, UnicodeDecodeError) as exc:
            self._error = SandboxError(400, f"malformed JSON body: {exc}")
            return
        if not isinstance(self._parsed, dict):
            self._error = SandboxError(400, "JSON body must be an object")

    def json(self) -> dict[str, Any]:
        """The body as a dict, or raise the 400 that a malformed body deserves."""
        if self._error is not None:
            raise self._error
        return self._parsed

    def body_field(self, name: str) -> Any:
        """A body field for counting purposes; None when the body is unusable."""
        return self._parsed.get(name) if self._error is None else None

    def query_value(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


# -- services -------------------------------------------------------------


def get_order(call: Call) -> Reply:
    order = call.state.get_order(call.params["order_id"])
    if order is None:
        return Reply(404, {"error": "order not found"})
    return Reply(200, order)


def create_refund(call: Call) -> Reply:
    if not call.idempotency_key:
        return Reply(400, {"error": "Idempotency-Key header is required"})
    refund, created = call.state.create_refund(call.idempotency_key, call.json())
    if created:
        return Reply(201, refund)
    # Stripe-style hint, so a client (or a human reading a trace) can tell a replay from a first effect.
    return Reply(200, refund, {"Idempotent-Replayed": "true"})


def create_ticket(call: Call) -> Reply:
    return Reply(201, call.state.create_ticket(call.idempotency_key, call.json()))


def list_tickets(call: Call) -> Reply:
    business_key = call.query_value("business_key")
    if not business_key:
        return Reply(400, {"error": "business_key query parameter is required"})
    return Reply(200, {"tickets": call.state.tickets_for(business_key)})


def customer_tickets(call: Call) -> Reply:
    found = call.state.customer_tickets(call.params["order_id"])
    if found is None:
        return Reply(404, {"error": "order not found"})
    customer, tickets = found
    return Reply(200, {"customer": customer, "tickets": tickets})


def create_notification(call: Call) -> Reply:
    notification = call.state.create_notification(call.idempotency_key, call.json())
    return Reply(201, notification)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI "content parts": keep only the text parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _message_text(message)
    return ""


def _order_id_in_messages(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    match = ORDER_ID_PATTERN.search(_last_user_text(messages))
    return match.group(0) if match else None


def chat_completion(call: Call) -> Reply:
    body = call.json()
    model = require_text(body, "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise SandboxError(400, "messages must be a non-empty list")
    if body.get("tools"):  # a tool-calling conversation: the support agent's scripted model answers it
        message = assistant_message(ScriptedSupportModel().chat([m for m in messages if isinstance(m, dict)],
                                                                body["tools"]))
    else:
        message = {"role": "assistant", "content": json.dumps(
            {"intent": "refund", "order_id": _order_id_in_messages(messages), "reason": "customer requests a refund"})}
    content = message.get("content") or json.dumps(message.get("tool_calls"))
    prompt_tokens = sum(len(_message_text(m).split()) for m in messages if isinstance(m, dict))
    completion_tokens = len(content.split())
    return Reply(
        200,
        {
            "id": f"chatcmpl-sandbox-{call.state.next_sequence('llm')}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


# -- control endpoints ----------------------------------------------------


def health(call: Call) -> Reply:
    return Reply(200, {"ok": True})


def get_calls(call: Call) -> Reply:
    return Reply(200, call.state.calls_snapshot())


def get_state(call: Call) -> Reply:
    return Reply(200, call.state.snapshot())


def reset(call: Call) -> Reply:
    call.state.reset()
    return Reply(200, {"ok": True})


def arm_fault(call: Call) -> Reply:
    body = call.json()
    call.state.arm_fault(body.get("service", ""), body.get("mode", ""), body.get("times", 1))  # validated there
    return Reply(200, {"faults": call.state.faults_snapshot()})


def get_faults(call: Call) -> Reply:
    return Reply(200, {"faults": call.state.faults_snapshot()})


def clear_faults(call: Call) -> Reply:
    call.state.clear_faults()
    return Reply(200, {"faults": call.state.faults_snapshot()})


def upsert_order(call: Call) -> Reply:
    return Reply(200, call.state.upsert_order(call.json()))


def list_orders(call: Call) -> Reply:
    return Reply(200, {"orders": call.state.list_orders()})


# -- routing --------------------------------------------------------------

BusinessKey = Callable[[Call], Any]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Callable[[Call], Reply]
    service: str | None = None  # None: control endpoint, neither counted nor faultable
    business_key: BusinessKey | None = None


def _route(method: str, path: str, handler: Callable[[Call], Reply], service: str | None = None,
           business_key: BusinessKey | None = None) -> Route:
    pattern = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path) + "$")
    return Route(method, pattern, handler, service, business_key)


ROUTES: tuple[Route, ...] = (
    _route("GET", "/orders/{order_id}", get_order, "orders", lambda c: c.params["order_id"]),
    _route("GET", "/orders/{order_id}/tickets", customer_tickets, "tickets", lambda c: c.params["order_id"]),
    _route("POST", "/payments/refunds", create_refund, "payments", lambda c: c.body_field("order_id")),
    _route("POST", "/tickets", create_ticket, "tickets", lambda c: c.body_field("business_key")),
    _route("GET", "/tickets", list_tickets, "tickets", lambda c: c.query_value("business_key")),
    _route("POST", "/notifications", create_notification, "notifications", lambda c: c.body_field("business_key")),
    _route("POST", "/v1/chat/completions", chat_completion, "llm",
           lambda c: _order_id_in_messages(c.body_field("messages"))),
    _route("GET", "/health", health),
    _route("GET", "/_control/calls", get_calls),
    _route("GET", "/_control/state", get_state),
    _route("POST", "/_control/reset", reset),
    _route("GET", "/_control/faults", get_faults),
    _route("POST", "/_control/faults", arm_fault),
    _route("DELETE", "/_control/faults", clear_faults),
    _route("GET", "/_control/orders", list_orders),
    _route("POST", "/_control/orders", upsert_order),
)


def find_route(method: str, path: str) -> tuple[Route | None, dict[str, str], list[str]]:
    """Return (route, path params, methods allowed on this path); route is None on 404/405."""
    allowed: list[str] = []
    for route in ROUTES:
        match = route.pattern.match(path)
        if match is None:
            continue
        if route.method == method:
            return route, match.groupdict(), allowed
        allowed.append(route.method)
    return None, {}, allowed


def _business_key(route: Route, call: Call) -> str | None:
    value = route.business_key(call) if route.business_key is not None else None
    # Counters are keyed by strings; ignore junk rather than crash the counting step.
    return value if isinstance(value, str) and value else None


# -- HTTP plumbing --------------------------------------------------------


class SandboxHandler(BaseHTTPRequestHandler):
    """Turns one HTTP request into a Call, applies any armed fault, and writes a JSON reply."""

    protocol_version = "HTTP/1.1"  # keep-alive like real services, hence Content-Length on every reply
    server_version = "DurableSandbox/1.0"
    # Headers and body go out in two writes; with Nagle on, the second waits for a delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    server: _SandboxHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        # Silence per-request stderr lines: they would drown test output and the demo console.
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        try:
            reply = self._reply_for(method)
        except _DropConnection:
            # Write nothing and close: the client sees the connection end without a response.
            self.close_connection = True
            return
        self._send(reply)

    def _reply_for(self, method: str) -> Reply:
        try:
            raw_body = self._read_body()
            split = urlsplit(self.path)
            path = split.path.rstrip("/") or "/"
            route, params, allowed = find_route(method, path)
            if route is None:
                if allowed:
                    return Reply(405, {"error": "method not allowed"}, {"Allow": ", ".join(allowed)})
                return Reply(404, {"error": f"no such endpoint: {method} {path}"})
            call = Call(
                state=self.server.state,
                params=params,
                query=parse_qs(split.query),
                idempotency_key=self.headers.get("Idempotency-Key") or None,
                raw_body=raw_body,
            )
            if route.service is None:
                return route.handler(call)
            return self._serve_service(route, route.service, call)
        except SandboxError as exc:
            return Reply(exc.status, {"error": exc.message})
        except _DropConnection:
            raise
        except Exception as exc:  # a bug in the sandbox must still answer JSON, not hang the client
            return Reply(500, {"error": f"internal sandbox error: {exc!r}"})

    def _serve_service(self, route: Route, service: str, call: Call) -> Reply:
        state = self.server.state
        # Count before faulting: a rate-limited or dropped call still reached the service.
        state.record_call(service, call.idempotency_key, _business_key(route, call))
        fault = state.take_fault(service)
        if fault == "429":
            return Reply(429, {"error": "rate limited"}, {"Retry-After": state.retry_after})
        if fault == "503":
            return Reply(503, {"error": "service unavailable"})
        if fault == "hang":
            # Event.wait instead of sleep so stop() does not have to wait for hung requests.
            self.server.stopping.wait(self.server.hang_seconds)
            raise _DropConnection()
        if fault == "slow":
            self.server.stopping.wait(self.server.hang_seconds)
        try:
            reply = route.handler(call)  # the business effect, if any, happens here
        except SandboxError as exc:
            reply = Reply(exc.status, {"error": exc.message})
        if fault == "drop_after_success":
            raise _DropConnection()
        return reply

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True  # the unread body would corrupt the next request on this socket
            raise SandboxError(411, "chunked request bodies are not supported; send Content-Length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise SandboxError(400, "invalid Content-Length") from None
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            raise SandboxError(413 if length > 0 else 400, "request body size not accepted")
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        payload = json.dumps(reply.body).encode("utf-8")
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. its timeout fired); nothing left to tell it.
            self.close_connection = True


class _SandboxHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung or keep-alive connection must never block interpreter exit
    allow_reuse_address = True  # tests and demos restart on the same port quickly

    def __init__(self, address: tuple[str, int], state: SandboxState, hang_seconds: float,
                 stopping: threading.Event) -> None:
        self.state = state
        self.hang_seconds = hang_seconds
        self.stopping = stopping
        super().__init__(address, SandboxHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can stall for
        # seconds on machines without DNS; the sandbox never needs the fully qualified name.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = port

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients dropping connections (timeouts, faults) is routine here, not worth a traceback.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class SandboxServer:
    """The sandbox services on a real socket, served from a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, hang_seconds: float = 30.0,
                 state: SandboxState | None = None) -> None:
        self.host = host
        self.port = port
        self.hang_seconds = hang_seconds
        self.state = state if state is not None else SandboxState()
        self._stopping = threading.Event()
        self._httpd: _SandboxHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SandboxServer:
        """Bind the socket and serve in a daemon thread; returns self for chaining."""
        if self._httpd is not None:
            raise RuntimeError("sandbox server already started")
        self._stopping.clear()
        self._httpd = _SandboxHTTPServer((self.host, self.port), self.state, self.hang_seconds, self._stopping)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # short poll so stop() returns quickly
            name=f"durable-sandbox-{self._httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        """Base URL such as "http://127.0.0.1:8765" (the real port when constructed with port=0)."""
        if self._httpd is None:
            raise RuntimeError("sandbox server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"  # typeshed allows bytes

    def stop(self) -> None:
        """Stop serving and release the port; wakes any request that is hanging on a fault."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> SandboxServer:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
