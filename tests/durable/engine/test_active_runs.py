"""A workflow's policy for a start whose business key already has an active run (durable/engine/active_runs.py)."""
import pytest

from durable.engine.active_runs import OnActiveBusinessKey


@pytest.mark.parametrize("policy, one", [
    (OnActiveBusinessKey.RETURN_EXISTING, True),
    (OnActiveBusinessKey.REFUSE, True),
    (OnActiveBusinessKey.START_ANOTHER, False),
])
def test_only_start_another_lets_runs_of_one_business_key_overlap(policy, one):
    assert policy.one_active_run is one


def test_the_policies_are_the_words_a_workflow_declares():
    assert [str(policy) for policy in OnActiveBusinessKey] == ["return_existing", "refuse", "start_another"]
    assert OnActiveBusinessKey("refuse") is OnActiveBusinessKey.REFUSE
