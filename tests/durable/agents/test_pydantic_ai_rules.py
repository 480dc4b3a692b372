"""The rules DurableAgent applies before and around a run: what a run is pinned to, which errors durable retries,
which models it refuses, and that nothing of durable imports Pydantic AI unless the wrapper is imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.conf import settings
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAuthenticationError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelServerError,
    UsageLimitExceeded,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from durable import NonRetryableError, RetryableError, classify
from durable.agents.pydantic_ai import Approval, DurableAgent, SideEffectTool, durable_error
from durable.tools.demo import downstreams
from tests.durable.agents import agent_workflows as aw


def an_agent(system_prompt: str = "Be brief.", description: str = "Read the order.", **options) -> Agent:
    agent = Agent(TestModel(), system_prompt=system_prompt, name="helper", **options)

    @agent.tool_plain(description=description)
    def read_order(order_id: str) -> str:
        return order_id

    return agent


# -- what a run is pinned to ---------------------------------------------------------------------------------------

def test_the_same_agent_built_again_has_the_same_releases():
    assert DurableAgent(an_agent()).prompt_release == DurableAgent(an_agent()).prompt_release
    assert DurableAgent(an_agent()).tool_catalog_version == DurableAgent(an_agent()).tool_catalog_version
    assert aw.build_agent().prompt_release == aw.test_agent.prompt_release


def test_another_system_prompt_instructions_or_model_is_another_prompt_release():
    base = DurableAgent(an_agent()).prompt_release
    assert base.startswith("helper-prompt-") and len(base) <= 100
    assert DurableAgent(an_agent(system_prompt="Be thorough.")).prompt_release != base
    assert DurableAgent(an_agent(instructions="Answer in French.")).prompt_release != base
    other_model = an_agent()
    other_model.model = TestModel(model_name="other")
    assert DurableAgent(other_model).prompt_release != base
    assert DurableAgent(an_agent()).tool_catalog_version == DurableAgent(an_agent(system_prompt="x")).tool_catalog_version


def prompt_saying(word: str):
    """Two prompt functions of one name: only their source tells them apart."""
    if word == "hello":
        def prompt(ctx) -> str:
            return "Say hello."
    else:
        def prompt(ctx) -> str:
            return "Say goodbye."
    return prompt


def test_a_prompt_function_is_pinned_by_its_source():
    def with_prompt(word: str) -> str:
        agent = an_agent()
        agent.system_prompt(prompt_saying(word))
        return DurableAgent(agent).prompt_release

    assert with_prompt("hello") == with_prompt("hello") != with_prompt("goodbye")


def test_another_tool_description_or_what_durable_does_with_a_tool_is_another_tool_catalog_version():
    base = DurableAgent(an_agent()).tool_catalog_version
    assert DurableAgent(an_agent(description="Read it.")).tool_catalog_version != base
    as_effect = DurableAgent(an_agent(), side_effects={"read_order": SideEffectTool("read", downstreams.tickets)})
    assert as_effect.tool_catalog_version != base
    asking = DurableAgent(an_agent(), approvals={"read_order": Approval("read", snapshot=dict, approve=dict,
                                                                       revalidate=dict, expires_in=timedelta(days=1))})
    assert asking.tool_catalog_version != base


def test_the_test_workflow_pins_its_agents_releases():
    workflow = aw.test_agent_workflow
    assert (workflow.prompt_release, workflow.tool_catalog_version) == (aw.test_agent.prompt_release,
                                                                       aw.test_agent.tool_catalog_version)
    assert set(workflow.pinned) == {"prompt_release", "tool_catalog_version"}


# -- retries have one owner ----------------------------------------------------------------------------------------

def test_a_model_whose_client_retries_by_itself_is_refused():
    model = FunctionModel(aw.script)
    model.client = SimpleNamespace(max_retries=2)  # type: ignore[attr-defined]  (as an OpenAI or Anthropic client has)
    with pytest.raises(ValueError, match="max_retries=2"):
        DurableAgent(Agent(model))
    model.client = SimpleNamespace(max_retries=0)  # type: ignore[attr-defined]
    DurableAgent(Agent(model))


def test_a_model_given_by_name_is_refused_since_its_client_would_retry():
    with pytest.raises(ValueError, match="not the name 'openai:gpt-5'"):
        DurableAgent(Agent("openai:gpt-5", defer_model_check=True))


@pytest.mark.parametrize("error, retryable, kind, retry_after", [
    (ModelRateLimitError("m", "slow down", retry_after=12.0), True, "rate_limited", 12.0),
    (ModelHTTPError(429, "m", headers={"Retry-After": "3"}), True, "rate_limited", 3.0),
    (ModelHTTPError(503, "m"), True, "transient_http", None),  # no category of its own: read by its status
    (ModelServerError("m", "boom"), True, "transient_http", None),
    (ModelHTTPError(400, "m"), False, "invalid_request", None),
    (ModelAuthenticationError("m", "bad key"), False, "permission_denied", None),
    (ModelQuotaExceededError("m", "no credits"), False, "quota_exceeded", None),
    (ContentFilterError("the provider refused: content_filter"), False, "content_policy_refusal", None),
    (UsageLimitExceeded("the run asked the model 50 times"), False, "usage_limit_exceeded", None),
])
def test_pydantic_ais_model_errors_are_classified_for_durables_retry_policy(error, retryable, kind, retry_after):
    classified = durable_error(error)
    assert isinstance(classified, RetryableError if retryable else NonRetryableError)
    verdict = classify(classified)
    assert (verdict.retryable, verdict.kind, verdict.retry_after) == (retryable, kind, retry_after)


def test_errors_durable_already_knows_pass_through_unchanged():
    error = RetryableError("downstream briefly unavailable")
    assert durable_error(error) is error
    timeout = TimeoutError("read timed out")
    assert durable_error(timeout) is timeout and classify(timeout).retryable


# -- an optional extra ---------------------------------------------------------------------------------------------

IMPORT_DURABLE = """
import json, sys
import django
django.setup()
import durable, durable.agents, durable.runtime.executor, durable.workflow, durable.tasks
before = "pydantic_ai" in sys.modules
import durable.agents.pydantic_ai
print(json.dumps({"before": before, "after": "pydantic_ai" in sys.modules}))
"""


def test_nothing_of_durable_imports_pydantic_ai_until_the_wrapper_is_imported():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.host_settings"}  # a host project: no demo workflows
    out = subprocess.run([sys.executable, "-c", IMPORT_DURABLE], env=env, cwd=settings.BASE_DIR, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {"before": False, "after": True}
