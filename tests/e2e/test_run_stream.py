"""In a real browser: a run's page follows its stream live (durable/static/durable/run-stream.js). The page is
opened while the run is still PENDING; the run is then advanced in this process, and the text it publishes
appears, its progress is listed, and the panel says the stream ended with the run's status."""
import pytest
from playwright.sync_api import Page, expect

from durable import services
from tests.conftest import user_with_roles
from tests.durable.claims import advance
from tests.durable.stream_workflows import NAME
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_running_runs_page_shows_what_it_publishes_as_it_comes_then_the_end(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    run, _ = services.start_run(workflow=NAME, input={"parts": 3}, business_key="CHAT-E2E")
    log_in(page, "olga", "olga-secret")
    page.goto(f"/runs/{run.id}/")
    panel = page.locator("section.run-stream")
    expect(panel.locator(".stream-state")).to_have_text("Following: nothing published yet.")  # connected
    advance(run)  # while the page follows: every chunk reaches it live
    expect(panel.locator(".stream-text")).to_have_text("part 0 part 1 part 2 part 3 part 4 part 5 ")
    expect(panel.locator(".stream-events li")).to_have_count(2)
    expect(panel.locator(".stream-events li").first).to_contain_text('progress (go_on): {"said":6}')
    expect(panel.locator(".stream-state")).to_contain_text("the run is SUCCEEDED")
