"""In a real browser at a phone's width: the run's graph fits the screen, styled by the console's stylesheet.

A loop with a branch, a route back, a skip and a self-loop, as an agent workflow draws; its run advanced
in this process (so the page shows exactly what the test made). The screenshot lands in
test-output/screenshots/run-graph-390.png; a parallel group's row, parallel-group-390.png.
"""
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect
from pydantic import BaseModel

from durable import OnActiveBusinessKey, RetryableError, Workflow, register, services
from durable.runtime import executor
from tests.conftest import user_with_roles
from tests.e2e.conftest import SCREENSHOTS, log_in

pytestmark = pytest.mark.django_db(transaction=True)


class Agent(BaseModel):
    turns: int = 0


agent = Workflow(name="test-drawn-agent", version=1, state=Agent, input=Agent,
                 on_active_business_key=OnActiveBusinessKey.START_ANOTHER)


@agent.step(next=["call_tools", "answer_the_customer"])
def plan(ctx: Any, state: Agent) -> Any:
    state.turns += 1
    return agent.goto("call_tools" if state.turns < 3 else "answer_the_customer")


@agent.step(next=["plan", "call_tools", "escalate_to_a_human_reviewer"])
def call_tools(ctx: Any, state: Agent) -> Any:
    return agent.goto("plan")


@agent.step(side_effects=["refund_payment", "send_customer_email"])
def escalate_to_a_human_reviewer(ctx: Any, state: Agent) -> Agent:
    return state


@agent.step(side_effects=["send_customer_email"])
def answer_the_customer(ctx: Any, state: Agent) -> Agent:
    raise RetryableError("the mail server is briefly away")  # the run waits here: its visit #1 is due again


register(agent)


@contextmanager
def on_a_phone(browser: Browser, live_server: Any, workflow: str, **given: Any) -> Iterator[tuple[Page, int]]:
    """The page of a run of `workflow`, advanced in this process, opened 390 px wide by an operator; the window's
    width. The page must not scroll sideways."""
    user_with_roles("olga", "operator", password="olga-secret")
    run, _ = services.start_run(workflow=workflow, input=given, business_key="drawn-1", enqueue=False)
    executor.advance(run.id)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, "olga", "olga-secret")
        page.goto(f"/runs/{run.id}/")
        scroll_width, window_width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll_width <= window_width, f"the page is {scroll_width} px wide at {window_width} px"
        yield page, window_width
    finally:
        context.close()


def save(locator: Locator, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_the_graph_of_a_loop_fits_a_phone_and_is_drawn_with_the_stylesheet(browser: Browser, live_server, own_queue):
    with on_a_phone(browser, live_server, "test-drawn-agent") as (page, window_width):
        graph = page.locator("svg.graph")
        expect(graph).to_be_visible()
        expect(graph.locator("g.graph-node")).to_have_count(5)  # four steps and the end
        expect(graph.locator("polyline.graph-edge")).to_have_count(7)
        box = graph.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= window_width
        expect(graph.locator("g.graph-current")).to_have_attribute("data-step", "answer_the_customer")
        expect(graph.locator("g.graph-current .graph-visits")).to_have_text("#1 now")
        # The stylesheet reaches the SVG (the CSP allows no inline style): the current step is outlined.
        stroke = page.locator("g.graph-current rect").evaluate("rect => getComputedStyle(rect).strokeWidth")
        assert stroke == "3.5px"
        assert page.locator("g.graph-node rect").first.evaluate("rect => getComputedStyle(rect).fill") != "rgb(0, 0, 0)"
        save(page.locator("section.run-graph"), "run-graph-390")


def test_a_parallel_group_reads_as_one_row_with_its_calls_on_a_phone(browser: Browser, live_server, own_queue,
                                                                      tmp_path):
    from tests.durable import visit_workflows  # noqa: F401 (registers test-parallel)
    with on_a_phone(browser, live_server, "test-parallel", calls_file=str(tmp_path / "calls"), effect=True) as (
            page, _):
        group = page.locator("tr.timeline-group")
        expect(group).to_have_count(1)
        expect(group.locator("ol.parallel-calls > li")).to_have_count(5)  # 3 activities, the charge prepared and done
        save(group, "parallel-group-390")
