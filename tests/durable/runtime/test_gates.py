"""The approval gate behind ctx.request_approval (durable/runtime/gates.py): the approvals app's, registered."""
import pytest

from durable.engine.errors import NonRetryableError
from durable.engine.states import RunStatus
from durable.runtime import gates
from tests.durable.claims import advance, start_claim


def test_the_approvals_app_registers_its_gate_when_it_is_ready():
    from approvals.gate import request_approval

    assert gates.approval_gate() is request_approval


def test_without_the_approvals_app_asking_for_an_approval_is_refused_naming_the_app(monkeypatch):
    monkeypatch.setattr(gates, "_approval_gate", None)
    with pytest.raises(NonRetryableError) as refused:
        gates.approval_gate()
    assert refused.value.kind == "approvals_not_installed" and not refused.value.retryable
    assert 'add "approvals" to INSTALLED_APPS' in str(refused.value)


@pytest.mark.django_db(transaction=True)
def test_a_run_that_asks_without_the_app_fails_visibly_instead_of_waiting(demo, monkeypatch):
    monkeypatch.setattr(gates, "_approval_gate", None)
    run = advance(start_claim("ORD-1001", version=2))  # version 2 asks for the refund's approval
    assert run.status == RunStatus.FAILED, run.error
    assert (run.error["kind"], run.error["retryable"]) == ("approvals_not_installed", False)
