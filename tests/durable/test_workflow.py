"""The workflow API and the registry that holds versions side by side."""
import sys
import uuid

import pytest
from pydantic import BaseModel

import durable.registry as registry_module
from durable import RetryPolicy, Workflow
from durable.conf import durable_settings
from durable.registry import UnknownWorkflow, WorkflowRegistry, discover


class S(BaseModel):
    x: int = 0


def make(version=1, steps=("a", "b")):
    wf = Workflow(name="wf", version=version, state=S, input=S, prompt_release="p")
    for name in steps:
        wf.step(lambda ctx, state: state, name=name)
    return wf


def test_steps_run_in_declaration_order():
    wf = make(steps=("plan", "read", "act"))
    assert (wf.first_step, wf.next_step("plan"), wf.next_step("read"), wf.next_step("act")) == ("plan", "read", "act", None)


def test_a_step_name_is_unique_within_a_version():
    with pytest.raises(ValueError, match="already has a step 'a'"):
        make(steps=("a", "a"))


def test_step_retry_policy_overrides_the_workflow_default():
    wf = make()
    wf.step(lambda ctx, s: s, name="c", retry=RetryPolicy(max_attempts=9))
    assert wf.retry_policy_for("c").max_attempts == 9 and wf.retry_policy_for("a") == wf.retry


def test_the_contract_recorded_at_start_names_every_pinned_version():
    assert make().contract() == {
        "workflow_name": "wf", "workflow_version": 1, "checkpoint_schema_version": 1, "tool_catalog_version": "",
        "prompt_release": "p", "model_policy_version": "", "topology_fingerprint": make().fingerprint,
        "topology": [{"step": "a", "side_effects": []}, {"step": "b", "side_effects": []}],
    }


def test_declared_side_effects_change_the_fingerprint():
    plain, paying = make(), make()
    paying.step(lambda ctx, s: s, name="pay", side_effects=["refund"])
    plain.step(lambda ctx, s: s, name="pay")
    assert plain.fingerprint != paying.fingerprint


def test_registry_holds_versions_side_by_side_and_starts_the_newest():
    reg = WorkflowRegistry()
    v1, v2 = reg.register(make(1)), reg.register(make(2, steps=("a", "x", "b")))
    assert reg.get("wf", 1) is v1 and reg.latest("wf") is v2
    with pytest.raises(UnknownWorkflow):
        reg.get("wf", 3)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(make(1))


DISCOVERED = """
from pydantic import BaseModel
from durable import Workflow, register

class S(BaseModel):
    x: int = 0

found = register(Workflow(name="found-by-discovery", version=1, state=S, input=S, prompt_release="p"))
found.step(lambda ctx, state: state, name="only")
"""


def test_workflows_are_discovered_from_the_modules_setting(tmp_path, monkeypatch, settings):
    """A module nothing has imported yet: its workflow is registered once the setting names it, not before."""
    fresh = WorkflowRegistry()  # empty: only this discovery can put the workflow there
    monkeypatch.setattr(registry_module, "registry", fresh)
    module = f"workflows_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(DISCOVERED)
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, module, raising=False)  # and taken out again when the test ends
    settings.DURABLE_WORKFLOW_MODULES = [module]
    assert module not in sys.modules and "found-by-discovery" not in fresh.names()

    discover(durable_settings.DURABLE_WORKFLOW_MODULES)  # what DurableConfig.ready() does at start-up

    assert module in sys.modules and fresh.import_failures == {}
    assert fresh.current("found-by-discovery").first_step == "only"


def test_a_budget_is_a_durable_budget_and_a_new_run_records_it():
    from decimal import Decimal

    from durable import Budget

    with pytest.raises(ValueError, match="budget must be a durable.Budget"):
        Workflow(name="wf", version=1, state=S, input=S, budget={"tokens": 100})  # type: ignore[arg-type]
    capped = Workflow(name="wf", version=1, state=S, input=S, budget=Budget(tokens=100, cost="1.50"))
    assert capped.budget_fields() == {"budget_tokens": 100, "budget_cost": Decimal("1.50")}
    assert make().budget_fields() == {"budget_tokens": None, "budget_cost": None}
