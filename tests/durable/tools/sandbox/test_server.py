"""Specification of the sandbox services: what each fake service does, how it counts, and how faults behave."""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable.tools.sandbox import FAULT_MODES, SandboxServer

HANG_SECONDS = 1.0
CLIENT_TIMEOUT = 0.3
REPO_ROOT = Path(__file__).resolve().parents[4]
SANDBOX_DIR = REPO_ROOT / "durable" / "sandbox"


@pytest.fixture
def server() -> Iterator[SandboxServer]:
    with SandboxServer(port=0, hang_seconds=HANG_SECONDS) as running:
        yield running


@pytest.fixture
def client(server: SandboxServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=5.0) as http:
        yield http


def refund(client: httpx.Client, key: str | None, order_id: str = "ORD-1001", amount: str = "120.00",
           **kwargs: object) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post("/payments/refunds", json={"order_id": order_id, "amount": amount}, headers=headers, **kwargs)


def calls(client: httpx.Client) -> dict:
    return client.get("/_control/calls").json()


def arm(client: httpx.Client, service: str, mode: str, times: int = 1) -> None:
    response = client.post("/_control/faults", json={"service": service, "mode": mode, "times": times})
    assert response.status_code == 200, response.text


# -- lifecycle ------------------------------------------------------------


def test_health_reports_ok(client: httpx.Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


def test_server_exposes_url_and_state_and_releases_port_on_stop() -> None:
    server = SandboxServer(port=0).start()
    url = server.url
    assert url.startswith("http://127.0.0.1:")
    assert server.state.get_order("ORD-1001") is not None
    assert httpx.get(url + "/health").json() == {"ok": True}
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=CLIENT_TIMEOUT)


def test_fault_modes_are_exported() -> None:
    assert FAULT_MODES == ("429", "503", "hang", "drop_after_success", "slow")


def test_sandbox_modules_use_only_the_standard_library() -> None:
    for source in SANDBOX_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith("durable.tools.sandbox"), (source.name, name)


def test_command_line_prints_url_and_stops_cleanly_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "durable.tools.sandbox", "--host", "127.0.0.1", "--port", "0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = process.stdout.readline().strip()
        url = line.rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/health", timeout=5).json() == {"ok": True}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
        assert process.stdout.read() == ""  # exactly one line of output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


# -- orders ---------------------------------------------------------------


def test_orders_are_seeded_for_the_demo(client: httpx.Client) -> None:
    assert client.get("/orders/ORD-1001").json() == {
        "order_id": "ORD-1001", "customer": "Ada Lovelace", "amount": "120.00", "currency": "EUR",
        "status": "paid", "refunded_amount": "0.00",
    }
    assert client.get("/orders/ORD-1002").json()["customer"] == "Grace Hopper"
    assert client.get("/orders/ORD-1002").json()["amount"] == "1450.00"
    assert client.get("/orders/ORD-1003").json()["amount"] == "35.50"


def test_unknown_order_is_404(client: httpx.Client) -> None:
    response = client.get("/orders/ORD-9999")
    assert response.status_code == 404
    assert response.json() == {"error": "order not found"}


def test_order_lookups_are_counted_by_business_key(client: httpx.Client) -> None:
    client.get("/orders/ORD-1001")
    client.get("/orders/ORD-1001")
    orders = calls(client)["orders"]
    assert orders["calls"] == 2
    assert orders["calls_by_business_key"] == {"ORD-1001": 2}
    assert orders["effects"] == 0


def test_a_customers_tickets_are_found_across_their_orders(client: httpx.Client) -> None:
    client.post("/_control/orders", json={"order_id": "ORD-0998", "customer": "Barbara Liskov", "amount": "10"})
    client.post("/tickets", json={"business_key": "ORD-0998", "subject": "late"})
    client.post("/tickets", json={"business_key": "ORD-1001", "subject": "another customer's"})
    found = client.get("/orders/ORD-1004/tickets").json()
    assert found["customer"] == "Barbara Liskov" and [t["subject"] for t in found["tickets"]] == ["late"]
    assert client.get("/orders/ORD-9999/tickets").status_code == 404
    assert calls(client)["tickets"]["calls_by_business_key"]["ORD-1004"] == 1


def test_control_orders_upserts_partial_and_new_orders(client: httpx.Client) -> None:
    changed = client.post("/_control/orders", json={"order_id": "ORD-1001", "amount": 80, "refunded_amount": "20"})
    assert changed.status_code == 200
    assert changed.json()["customer"] == "Ada Lovelace"  # untouched fields survive a partial update
    assert client.get("/orders/ORD-1001").json()["amount"] == "80.00"
    assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "20.00"

    client.post("/_control/orders", json={"order_id": "ORD-2000", "customer": "Edsger Dijkstra", "amount": "9.99"})
    created = client.get("/orders/ORD-2000").json()
    assert created == {"order_id": "ORD-2000", "customer": "Edsger Dijkstra", "amount": "9.99", "currency": "EUR",
                       "status": "paid", "refunded_amount": "0.00"}


def test_control_orders_requires_order_id(client: httpx.Client) -> None:
    response = client.post("/_control/orders", json={"amount": "1.00"})
    assert response.status_code == 400
    assert "order_id" in response.json()["error"]


# -- payments -------------------------------------------------------------


def test_payments_require_idempotency_key(client: httpx.Client) -> None:
    response = refund(client, key=None)
    assert response.status_code == 400
    assert response.json() == {"error": "Idempotency-Key header is required"}
    assert calls(client)["payments"]["effects"] == 0


def test_payments_same_idempotency_key_creates_one_refund(client: httpx.Client) -> None:
    first = refund(client, "refund-ORD-1001")
    second = refund(client, "refund-ORD-1001")

    assert first.status_code == 201
    assert second.status_code == 200
    assert second.headers["Idempotent-Replayed"] == "true"
    assert first.json() == second.json()
    assert first.json()["refund_id"] == "re_1"
    assert first.json()["status"] == "succeeded"
    assert first.json()["amount"] == "120.00"
    assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "120.00"
    payments = calls(client)["payments"]
    assert payments["calls"] == 2
    assert payments["calls_by_key"] == {"refund-ORD-1001": 2}
    assert payments["calls_by_business_key"] == {"ORD-1001": 2}
    assert payments["effects"] == 1
    assert payments["effects_by_key"] == {"refund-ORD-1001": 1}
    assert payments["effects_by_business_key"] == {"ORD-1001": 1}


def test_payments_key_reused_with_different_body_is_rejected(client: httpx.Client) -> None:
    refund(client, "k1", amount="10.00")
    response = refund(client, "k1", amount="11.00")
    assert response.status_code == 422
    assert response.json() == {"error": "Idempotency-Key reused with a different request"}
    assert calls(client)["payments"]["effects"] == 1


def test_payments_different_keys_double_refund_and_the_counters_show_it(client: httpx.Client) -> None:
    refund(client, "attempt-1", amount="60.00")
    refund(client, "attempt-2", amount="60.00")
    assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "120.00"
    assert calls(client)["payments"]["effects_by_business_key"] == {"ORD-1001": 2}


def test_payments_reject_unknown_orders_and_bad_amounts_without_effect(client: httpx.Client) -> None:
    assert refund(client, "a", order_id="ORD-9999").status_code == 404
    assert refund(client, "b", amount="lots").status_code == 400
    assert refund(client, "c", amount="-1").status_code == 400
    assert calls(client)["payments"]["effects"] == 0


def test_payments_concurrent_retries_with_one_key_create_one_refund(server: SandboxServer) -> None:
    results: list[dict] = []

    def attempt() -> None:
        with httpx.Client(base_url=server.url, timeout=5) as http:
            results.append(refund(http, "racing-key").json())

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {r["refund_id"] for r in results} == {"re_1"}
    assert server.state.calls_snapshot()["payments"]["effects"] == 1


# -- tickets and notifications --------------------------------------------


def test_tickets_ignore_keys_and_duplicate_on_retry(client: httpx.Client) -> None:
    payload = {"business_key": "run-1:ticket", "subject": "Refund ORD-1001"}
    first = client.post("/tickets", json=payload, headers={"Idempotency-Key": "same"})
    second = client.post("/tickets", json=payload, headers={"Idempotency-Key": "same"})

    assert first.status_code == second.status_code == 201
    assert first.json()["ticket_id"] == "TCK-1"
    assert second.json()["ticket_id"] == "TCK-2"
    tickets = calls(client)["tickets"]
    assert tickets["effects_by_key"] == {"same": 2}
    assert tickets["effects_by_business_key"] == {"run-1:ticket": 2}


def test_tickets_can_be_looked_up_by_business_key_oldest_first(client: httpx.Client) -> None:
    client.post("/tickets", json={"business_key": "A", "subject": "first"})
    client.post("/tickets", json={"business_key": "B", "subject": "other"})
    client.post("/tickets", json={"business_key": "A", "subject": "second", "body": "more"})

    found = client.get("/tickets", params={"business_key": "A"})
    assert found.status_code == 200
    assert [t["subject"] for t in found.json()["tickets"]] == ["first", "second"]
    assert client.get("/tickets", params={"business_key": "none"}).json() == {"tickets": []}
    lookups = calls(client)["tickets"]
    assert lookups["calls"] == 5  # lookups are calls too, but not effects
    assert lookups["effects"] == 3


def test_tickets_require_business_key_and_subject(client: httpx.Client) -> None:
    assert client.post("/tickets", json={"subject": "no key"}).status_code == 400
    assert client.post("/tickets", json={"business_key": "k"}).status_code == 400
    assert calls(client)["tickets"]["effects"] == 0


def test_notifications_every_call_is_a_new_effect(client: httpx.Client) -> None:
    payload = {"business_key": "run-1:notify", "to": "ada@example.com", "message": "Your refund is on its way"}
    first = client.post("/notifications", json=payload)
    second = client.post("/notifications", json=payload)
    assert first.status_code == second.status_code == 201
    assert first.json()["notification_id"] == "ntf-1"
    assert second.json()["notification_id"] == "ntf-2"
    assert calls(client)["notifications"]["effects_by_business_key"] == {"run-1:notify": 2}


# -- faults ---------------------------------------------------------------


def test_429_then_success(client: httpx.Client) -> None:
    arm(client, "payments", "429")
    limited = refund(client, "k")
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "1"
    assert limited.json() == {"error": "rate limited"}

    assert refund(client, "k").status_code == 201
    payments = calls(client)["payments"]
    assert payments["calls_by_key"] == {"k": 2}  # faulted calls are still counted
    assert payments["effects"] == 1


def test_503_has_no_effect(client: httpx.Client) -> None:
    arm(client, "tickets", "503")
    response = client.post("/tickets", json={"business_key": "k", "subject": "s"})
    assert response.status_code == 503
    assert "error" in response.json()
    assert calls(client)["tickets"]["effects"] == 0
    assert client.get("/tickets", params={"business_key": "k"}).json() == {"tickets": []}


def test_fault_times_arms_that_many_calls_then_service_recovers(client: httpx.Client) -> None:
    arm(client, "orders", "503", times=2)
    statuses = [client.get("/orders/ORD-1001").status_code for _ in range(3)]
    assert statuses == [503, 503, 200]


def test_faults_are_per_service(client: httpx.Client) -> None:
    arm(client, "payments", "503")
    assert client.post("/tickets", json={"business_key": "k", "subject": "s"}).status_code == 201
    assert refund(client, "k").status_code == 503


def test_delete_faults_clears_all_armed_faults(client: httpx.Client) -> None:
    arm(client, "payments", "429", times=3)
    arm(client, "llm", "hang")
    assert client.get("/_control/faults").json()["faults"]["payments"] == ["429", "429", "429"]
    assert client.delete("/_control/faults").status_code == 200
    assert all(not armed for armed in client.get("/_control/faults").json()["faults"].values())
    assert refund(client, "k").status_code == 201


def test_invalid_fault_is_rejected(client: httpx.Client) -> None:
    assert client.post("/_control/faults", json={"service": "payments", "mode": "explode"}).status_code == 400
    assert client.post("/_control/faults", json={"service": "bank", "mode": "429"}).status_code == 400
    assert client.post("/_control/faults", json={"service": "payments", "mode": "429", "times": 0}).status_code == 400


def test_drop_after_success_performs_effect_then_drops_connection(client: httpx.Client) -> None:
    arm(client, "payments", "drop_after_success")
    with pytest.raises(httpx.RemoteProtocolError):
        refund(client, "drop-key")
    # The refund happened even though the client never heard about it...
    assert calls(client)["payments"]["effects_by_key"] == {"drop-key": 1}
    assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "120.00"
    # ...and a retry with the same key learns the outcome instead of refunding again.
    retry = refund(client, "drop-key")
    assert retry.status_code == 200
    assert retry.json()["refund_id"] == "re_1"
    assert calls(client)["payments"]["effects"] == 1


def test_drop_after_success_on_tickets_is_visible_by_lookup(client: httpx.Client) -> None:
    arm(client, "tickets", "drop_after_success")
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/tickets", json={"business_key": "run-7", "subject": "s"})
    tickets = client.get("/tickets", params={"business_key": "run-7"}).json()["tickets"]
    assert [t["ticket_id"] for t in tickets] == ["TCK-1"]


def test_hang_times_out_client_without_effect(client: httpx.Client) -> None:
    arm(client, "notifications", "hang")
    payload = {"business_key": "n", "to": "x@example.com", "message": "hi"}
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        client.post("/notifications", json=payload, timeout=CLIENT_TIMEOUT)
    assert time.monotonic() - started < HANG_SECONDS
    notifications = calls(client)["notifications"]
    assert notifications["calls"] == 1
    assert notifications["effects"] == 0


def test_hang_ends_by_dropping_the_connection_without_effect() -> None:
    with SandboxServer(port=0, hang_seconds=0.2) as server, httpx.Client(base_url=server.url, timeout=5) as client:
        arm(client, "payments", "hang")
        started = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):
            refund(client, "hung")
        assert time.monotonic() - started >= 0.2
        assert calls(client)["payments"]["calls"] == 1
        assert calls(client)["payments"]["effects"] == 0
        assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "0.00"


def test_slow_answers_after_the_wait_and_its_effect_happens_only_then() -> None:
    with SandboxServer(port=0, hang_seconds=3) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        arm(client, "tickets", "slow")
        answered = threading.Event()
        looked_up: list[list[dict[str, str]]] = []

        def create() -> None:
            client.post("/tickets", json={"business_key": "slow-1", "subject": "s"})
            answered.set()

        thread = threading.Thread(target=create)
        thread.start()
        wait_until(lambda: server.state.calls_snapshot()["tickets"]["calls"] == 1)
        with httpx.Client(base_url=server.url, timeout=5) as other:  # a lookup while the call is in flight
            looked_up.append(other.get("/tickets", params={"business_key": "slow-1"}).json()["tickets"])
        thread.join(timeout=10)
        assert answered.is_set() and looked_up == [[]]  # the ticket did not exist until the answer
        assert calls(client)["tickets"]["effects"] == 1


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_stop_wakes_hanging_requests_promptly() -> None:
    server = SandboxServer(port=0, hang_seconds=30.0).start()
    server.state.arm_fault("orders", "hang")
    errors: list[Exception] = []

    def hang() -> None:
        try:
            httpx.get(server.url + "/orders/ORD-1001", timeout=5)
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    deadline = time.monotonic() + 10
    while server.state.faults_snapshot().get("orders") and time.monotonic() < deadline:
        time.sleep(0.01)  # until the request took its fault: it hangs on the server now
    started = time.monotonic()
    server.stop()
    thread.join(timeout=5)
    assert time.monotonic() - started < 2
    assert errors and isinstance(errors[0], httpx.RemoteProtocolError)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(faults=st.lists(st.sampled_from(FAULT_MODES), max_size=4))
def test_retrying_one_key_through_any_faults_refunds_exactly_once(
    server: SandboxServer, faults: list[str]
) -> None:
    server.state.reset()
    for mode in faults:
        server.state.arm_fault("payments", mode)
    outcomes = []
    # A short read timeout turns a "hang" into a quick client-side timeout, as a real client would see it.
    timeout = httpx.Timeout(5.0, read=0.1 if "hang" in faults else 5.0)
    with httpx.Client(base_url=server.url, timeout=timeout) as http:
        for _ in range(len(faults) + 1):
            try:
                outcomes.append(refund(http, "the-key").status_code)
            except httpx.HTTPError:
                outcomes.append("dropped")
    assert outcomes[-1] in (200, 201)
    assert server.state.calls_snapshot()["payments"]["effects"] == 1
    assert server.state.get_order("ORD-1001")["refunded_amount"] == "120.00"


# -- llm ------------------------------------------------------------------


def test_llm_endpoint_returns_openai_shape(server: SandboxServer) -> None:
    openai = pytest.importorskip("openai")
    llm = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    completion = llm.chat.completions.create(
        model="sandbox-model",
        messages=[
            {"role": "system", "content": "Extract the intent."},
            {"role": "user", "content": "Hi, I want my money back for ORD-1002 please (not ORD-1003)."},
        ],
    )
    assert completion.object == "chat.completion"
    assert completion.model == "sandbox-model"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.role == "assistant"
    assert json.loads(completion.choices[0].message.content) == {
        "intent": "refund", "order_id": "ORD-1002", "reason": "customer requests a refund",
    }
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    llm_calls = server.state.calls_snapshot()["llm"]
    assert llm_calls["calls"] == 1
    assert llm_calls["calls_by_business_key"] == {"ORD-1002": 1}


def test_llm_order_id_is_null_without_an_order_in_the_last_user_message(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": [
        {"role": "user", "content": "ORD-1001 was fine"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "now refund me"}]},
    ]})
    assert response.status_code == 200
    assert json.loads(response.json()["choices"][0]["message"]["content"])["order_id"] is None


def test_llm_endpoint_answers_a_tool_calling_request_with_tool_calls_then_an_answer(server: SandboxServer) -> None:
    openai = pytest.importorskip("openai")
    from durable.tools.demo.support_model import TOOLS

    llm = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    messages: list[dict] = [{"role": "user", "content": "Where is my order ORD-1004?"}]
    asked = llm.chat.completions.create(model="m", messages=messages, tools=TOOLS).choices[0]
    assert asked.finish_reason == "tool_calls" and asked.message.content is None
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in asked.message.tool_calls]
    assert calls == [("lookup_order", {"order_id": "ORD-1004"}), ("past_tickets", {"order_id": "ORD-1004"})]
    messages.append(asked.message.model_dump(exclude_none=True))
    messages += [{"role": "tool", "tool_call_id": c.id, "content": json.dumps(answer)} for c, answer in zip(
        asked.message.tool_calls, [server.state.get_order("ORD-1004"), {"customer": "Barbara Liskov", "tickets": []}], strict=True)]
    answered = llm.chat.completions.create(model="m", messages=messages, tools=TOOLS).choices[0]
    assert answered.finish_reason == "stop" and not answered.message.tool_calls
    assert answered.message.content.startswith("Your order ORD-1004 (89.90 EUR) is shipped.")
    assert server.state.calls_snapshot()["llm"]["calls_by_business_key"] == {"ORD-1004": 2}


def test_llm_faults_surface_as_openai_errors(server: SandboxServer) -> None:
    openai = pytest.importorskip("openai")
    server.state.arm_fault("llm", "429")
    llm = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        llm.chat.completions.create(model="m", messages=[{"role": "user", "content": "ORD-1001"}])
    assert server.state.calls_snapshot()["llm"]["calls"] == 1


# -- inspection, reset and errors -----------------------------------------


def test_calls_report_every_service_with_all_counters(client: httpx.Client) -> None:
    report = calls(client)
    assert set(report) == {"orders", "payments", "tickets", "notifications", "llm"}
    for counters in report.values():
        assert counters == {"calls": 0, "calls_by_key": {}, "calls_by_business_key": {}, "effects": 0,
                            "effects_by_key": {}, "effects_by_business_key": {}}


def test_reset_clears_everything_and_reseeds_orders(client: httpx.Client) -> None:
    refund(client, "k")
    client.post("/tickets", json={"business_key": "t", "subject": "s"})
    client.post("/_control/orders", json={"order_id": "ORD-1003", "amount": "1.00"})
    arm(client, "payments", "503")

    assert client.post("/_control/reset").json() == {"ok": True}

    assert all(c["calls"] == 0 and c["effects"] == 0 for c in calls(client).values())
    assert client.get("/tickets", params={"business_key": "t"}).json() == {"tickets": []}
    assert client.get("/orders/ORD-1001").json()["refunded_amount"] == "0.00"
    assert client.get("/orders/ORD-1003").json()["amount"] == "35.50"
    assert refund(client, "k").json()["refund_id"] == "re_1"  # no fault left, ids restart


def test_state_snapshot_lists_effects(client: httpx.Client) -> None:
    refund(client, "k")
    client.post("/notifications", json={"business_key": "n", "to": "x", "message": "m"})
    state = client.get("/_control/state").json()
    assert [r["refund_id"] for r in state["refunds"]] == ["re_1"]
    assert [n["notification_id"] for n in state["notifications"]] == ["ntf-1"]


def test_malformed_json_is_400(client: httpx.Client) -> None:
    response = client.post("/tickets", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "error" in response.json()
    not_an_object = client.post("/notifications", json=[1, 2])
    assert not_an_object.status_code == 400


def test_unknown_path_is_404_json_and_wrong_method_is_405(client: httpx.Client) -> None:
    missing = client.get("/nowhere")
    assert missing.status_code == 404
    assert "error" in missing.json()
    wrong = client.delete("/payments/refunds")
    assert wrong.status_code == 405
    assert wrong.headers["Allow"] == "POST"


def test_responses_are_json_with_content_length_over_keep_alive(client: httpx.Client) -> None:
    for _ in range(3):  # several requests reuse one HTTP/1.1 connection
        response = client.get("/health")
        assert response.http_version == "HTTP/1.1"
        assert response.headers["Content-Type"] == "application/json"
        assert int(response.headers["Content-Length"]) == len(response.content)
