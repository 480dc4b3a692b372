"""The agents benchmarks' fake model provider: it answers every call, counts each (run, step) and notes arrivals."""
from __future__ import annotations

import httpx

from durable.tools.bench.model_server import ModelServer, busiest_window, steady_throughput


def test_it_answers_each_call_and_counts_a_call_made_twice_as_a_duplicate():
    with ModelServer(call_ms=10) as server, httpx.Client() as client:
        for run, step in [("r1", 1), ("r1", 2), ("r2", 1), ("r1", 2)]:
            answer = client.get(f"{server.url}/model", params={"run": run, "step": step})
            assert answer.status_code == 200 and answer.json()["step"] == step
        calls = server.calls()
    assert calls.total == 4 and calls.duplicates == 1 and len(calls.arrivals) == 4
    assert calls.missing({("r1", 1), ("r1", 2), ("r2", 1), ("r2", 2)}) == 1


def test_a_request_that_names_no_call_is_refused_and_not_counted():
    with ModelServer(call_ms=1) as server:
        assert httpx.get(f"{server.url}/model?step=1").status_code == 400
        assert server.calls().total == 0


def test_the_busiest_window_counts_arrivals_within_any_second():
    assert busiest_window([0.0, 0.5, 0.99, 1.0, 1.2, 3.0]) == 4  # 0.5, 0.99, 1.0, 1.2
    assert busiest_window([0.0, 1.0, 2.0]) == 1
    assert busiest_window([]) == 0


def test_throughput_leaves_out_the_first_and_last_second():
    ramp_and_tail = [0.0, 0.1, 9.95, 10.0]
    steady = [1.0 + i / 50 for i in range(400)]  # 50 a second from 1 s to 9 s
    assert round(steady_throughput(ramp_and_tail + steady)) == 50
    assert steady_throughput([1.0]) == 0.0


def test_each_thread_calls_through_a_client_of_its_own():
    import threading

    from durable.tools.bench.model_server import thread_client

    mine, theirs = thread_client(5.0), []
    other = threading.Thread(target=lambda: theirs.append(thread_client(5.0)))
    other.start()
    other.join()
    assert thread_client(5.0) is mine and theirs[0] is not mine


def test_it_keeps_the_time_each_caller_says_it_sent_its_call():
    with ModelServer(call_ms=1) as server, httpx.Client() as client:
        client.get(f"{server.url}/model", params={"run": "r1", "step": 1}, headers={"X-Sent-At": "1700000000.25"})
        client.get(f"{server.url}/model", params={"run": "r1", "step": 2})  # a caller that does not say
        calls = server.calls()
    assert calls.sent == [1700000000.25] and len(calls.arrivals) == 2


def test_the_workflows_ask_through_a_keep_alive_connection_of_their_thread_with_either_client(monkeypatch):
    import pytest

    from durable.tools.bench.model_server import CLIENT, ask

    with ModelServer(call_ms=1) as server:
        for client in ("http.client", "httpx"):
            monkeypatch.setenv(CLIENT, client)
            assert ask(server.url, "r1", 1, 5.0, sent_at=1700000000.5) == {"run": "r1", "step": 1,
                                                                            "text": "answer 1 for r1"}
            assert ask(server.url, "r1", 2, 5.0)["step"] == 2
        monkeypatch.delenv(CLIENT)
        with pytest.raises(RuntimeError, match="400"):  # an error status raises, as httpx's raise_for_status does
            ask(server.url, "", 1, 5.0)  # no run named: refused
        assert ask(server.url, "r2", 1, 5.0)["run"] == "r2"  # the same connection still serves
        calls = server.calls()
    assert calls.per_call[("r1", 1)] == 2 and calls.sent == [1700000000.5, 1700000000.5]
