import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.retry import RetryPolicy


def test_backoff_doubles_up_to_the_cap_without_jitter():
    policy = RetryPolicy(initial_interval=1, backoff=2, max_interval=5, jitter=0)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]


@given(st.integers(min_value=1, max_value=50), st.integers(min_value=0, max_value=2**32))
def test_jitter_stays_within_its_fraction(attempt, seed):
    policy = RetryPolicy(initial_interval=0.5, backoff=2, max_interval=60, jitter=0.2)
    base = min(0.5 * 2 ** (attempt - 1), 60)
    assert base * 0.8 <= policy.delay(attempt, random.Random(seed)) <= base * 1.2


def test_attempts_are_bounded():
    policy = RetryPolicy(max_attempts=3)
    assert policy.allows_another(2) and not policy.allows_another(3)


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"backoff": 0.5}, {"jitter": 1.0},
                                    {"initial_interval": 10, "max_interval": 1}])
def test_nonsense_policies_are_refused(kwargs):
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)
