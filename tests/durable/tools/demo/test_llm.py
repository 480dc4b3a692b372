"""The demo planner's LLM client is an optional part: asked for without it, it says which extra to install."""
import sys

import pytest

from durable.tools.demo.llm import planner_model


def test_an_llm_endpoint_without_the_demo_extra_names_the_extra_to_install(settings, monkeypatch):
    settings.DURABLE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    monkeypatch.setitem(sys.modules, "openai", None)  # as if `openai` were not installed
    with pytest.raises(RuntimeError, match=r"pip install 'durable\[demo\]'"):
        planner_model()


def test_without_an_llm_endpoint_the_scripted_planner_needs_no_extra(settings, monkeypatch):
    settings.DURABLE_LLM_BASE_URL = ""
    monkeypatch.setitem(sys.modules, "openai", None)
    assert planner_model().name == "scripted"
