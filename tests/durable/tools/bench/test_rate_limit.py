"""`durable_bench --rate-limit R`: on code whose ctx.activity takes no `limit=`, it says so and starts nothing."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable.models import Run
from durable.runtime.context import StepContext
from durable.tools.bench import ratelimit


def activity_without_limits(self, name, fn, *args, returns=None, usage=None, **kwargs):
    """ctx.activity before named limits: a `limit=` would be passed on to the call."""


def activity_with_limits(self, name, fn, *args, returns=None, usage=None, limit=None, **kwargs):
    """ctx.activity with named limits (issue 37)."""


@pytest.mark.django_db
def test_without_named_limits_the_rate_limit_mode_says_so_and_starts_no_run(monkeypatch):
    monkeypatch.setattr(StepContext, "activity", activity_without_limits)
    with pytest.raises(CommandError, match="needs named limits .* ctx.activity takes no limit= argument"):
        call_command("durable_bench", "--rate-limit", "50", "--workers", "2")
    assert not Run.objects.exists()


def test_a_limit_parameter_of_its_own_is_what_counts_not_the_calls_keyword_arguments(monkeypatch):
    monkeypatch.setattr(StepContext, "activity", activity_without_limits)
    assert not ratelimit.limits_supported()
    monkeypatch.setattr(StepContext, "activity", activity_with_limits)
    assert ratelimit.limits_supported()


def test_by_default_the_runs_make_ten_seconds_of_calls_at_the_rate():
    assert ratelimit.default_runs(50) * 5 == 500
