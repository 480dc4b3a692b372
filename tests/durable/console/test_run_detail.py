"""A run's page: the replay-contract header, the timeline, and the state at any checkpoint."""
import re

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils.html import strip_tags

from durable import services
from durable.engine.states import RunStatus
from durable.permissions import CONTENTS_PERMISSIONS
from durable.runtime import executor
from tests.approvals.flow import decide, waiting_claim
from tests.conftest import make_user
from tests.durable.claims import advance, needs_attention
from tests.durable.console.screens import HTMX, VIEW, client_for, detail_url, run_in

pytestmark = pytest.mark.django_db


def state_url(run, seq):
    return reverse("durable:checkpoint-state", args=[run.id, seq])


def in_order(html, texts):
    positions = [html.index(text) for text in texts]
    return positions == sorted(positions)


def test_the_run_page_shows_its_replay_contract(viewer, calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="claim-7")
    executor.advance(run.id)
    response = viewer.get(detail_url(run))
    assert response.status_code == 200
    html = response.content.decode()
    assert str(run.id) in html and "claim-7" in html and "SUCCEEDED" in html
    assert "<dt>Workflow</dt><dd>test-counting v1</dd>" in html and "<dt>Prompt release</dt><dd>p1</dd>" in html
    assert "<dt>Checkpoint schema</dt><dd>1</dd>" in html and "<dt>Tool catalog</dt><dd>—</dd>" in html
    assert run.topology_fingerprint in html
    assert re.findall(r'<g class="graph-node[^"]*" data-step="([^"]+)">', html) == ["s1", "s2", "s3", "end"]


def test_the_topology_names_each_steps_side_effects(demo, viewer):
    run = advance(waiting_claim()[0])
    html = viewer.get(detail_url(run)).content.decode()
    assert "<td>payment</td><td>0 visits finished</td><td>ticket (the next step)</td><td>refund</td>" in html


def test_the_timeline_shows_checkpoints_activities_and_their_recorded_results(viewer, calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="claim-7")
    executor.advance(run.id)
    html = viewer.get(detail_url(run)).content.decode()
    assert in_order(html, [
        "checkpoint #0: run started → s1", "activity a1 #0 recorded", "checkpoint #1: s1 done → s2",
        "activity a2 #0 recorded", "checkpoint #2: s2 done → s3", "activity a3 #0 recorded",
        "activity a4 #1 recorded", "checkpoint #3: s3 done → end",
    ])
    assert "&quot;a4-result&quot;" in html and "Nothing recorded yet." not in html


def test_the_timeline_of_an_approved_claim_reads_in_order(demo, viewer):
    run, request = waiting_claim()
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    run = advance(run)
    html = client_for(make_user("reader", VIEW, "approvals.view_approvalrequest", *CONTENTS_PERMISSIONS)).get(detail_url(run)).content.decode()
    order = ["checkpoint #0: run started", "activity llm.plan #0 recorded", "approval asked",
             "ann approve (PENDING → APPROVED) from test", "approval used after revalidation",
             "side effect refund prepared", "side effect refund → SUCCEEDED", "checkpoint #5: payment done → ticket"]
    assert in_order(html, order)
    assert f'<a href="{reverse("approvals:detail", args=[request.id])}">the request</a>' in html
    without_approvals = viewer.get(detail_url(run)).content.decode()  # who may not see approvals gets no link
    assert "approval asked" in without_approvals and "the request</a>" not in without_approvals


def test_an_unknown_side_effect_links_to_its_reconciliation(demo, viewer):
    run, operation = needs_attention(demo)
    html = viewer.get(detail_url(run)).content.decode()
    link = f'<a href="/reconciliation/{operation.operation_id}/" class="reconcile">reconcile</a>'
    assert html.count(link) == 4  # prepared, → UNKNOWN, needs attention, and the ledger table
    settled = run.side_effects.exclude(operation_id=operation.operation_id).first()
    assert f"/reconciliation/{settled.operation_id}/" not in html


def test_the_run_page_of_a_new_run_shows_checkpoint_zero(viewer):
    run = run_in(RunStatus.PENDING)
    html = viewer.get(detail_url(run)).content.decode()
    assert "checkpoint #0: run started → step1" in html and "No side effects yet." in html


def test_the_run_page_shows_operator_actions(viewer):
    run = run_in(RunStatus.PENDING)
    services.cancel_run(run_id=run.id, user=make_user("olivia", "durable.cancel_run"), source="console",
                        reason="duplicate claim")
    html = viewer.get(detail_url(run)).content.decode()
    assert "olivia cancel (PENDING → CANCELLED) from console: duplicate claim" in html


def test_an_unknown_run_is_a_404(viewer):
    assert viewer.get("/runs/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_run_pages_load_only_script_files_the_project_ships(viewer):
    html = viewer.get(detail_url(run_in(RunStatus.PENDING))).content.decode()
    sources = [re.search(r'src="/static/([^"]+)"', tag).group(1) for tag in re.findall(r"<script[^>]*>", html)]
    assert all(finders.find(source) for source in sources) and not re.search(r"\son[a-z]+=", html)


# The state at a checkpoint


def test_each_checkpoint_links_to_its_state_loaded_in_place(viewer, calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="k")
    executor.advance(run.id)
    html = viewer.get(detail_url(run)).content.decode()
    for seq in range(4):
        assert f'<a href="{state_url(run, seq)}" hx-get="{state_url(run, seq)}" hx-target="#checkpoint-{seq}-state">' \
               in html
    fragment = viewer.get(state_url(run, 2), **HTMX)
    assert fragment.status_code == 200 and "HX-Request" in fragment["Vary"]
    text = fragment.content.decode()
    assert text.startswith('<div class="checkpoint-state">') and "<html" not in text
    assert '&quot;values&quot;: [\n    &quot;a1-result&quot;,\n    &quot;a2-result&quot;\n  ]' in strip_tags(text)


def test_a_checkpoint_state_opened_without_htmx_is_a_page(viewer):
    run = run_in(RunStatus.PENDING)
    response = viewer.get(state_url(run, 0))
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and "Checkpoint #0" in html
    assert '<code>{\n  <span class="json-key">&quot;n&quot;</span>: <span class="json-number">0</span>\n}</code>' in html


def test_an_unknown_checkpoint_is_a_404_and_needs_view_run(viewer):
    run = run_in(RunStatus.PENDING)
    assert viewer.get(state_url(run, 9)).status_code == 404
    assert client_for(make_user("outsider")).get(state_url(run, 0)).status_code == 403


def test_the_run_page_shows_routes_the_route_taken_and_a_spent_step_budget(viewer):
    from tests.durable import graph_workflows  # noqa: F401 (registers them)
    run, _ = services.start_run(workflow="test-endless", input={}, business_key="loop-1")
    executor.advance(run.id)
    html = viewer.get(detail_url(run)).content.decode()
    assert "<td>spin <strong>(now)</strong></td><td>5 visits finished</td><td>spin</td>" in html
    assert "checkpoint #2: spin done → spin (route spin -&gt; spin)" in html
    text = strip_tags(html)
    assert "step_budget_exhausted" in text and "stopped by the step budget after 5 visits" in text
