"""The run's page draws the graph the run is pinned to: a node per step, the routes, visits, where it is now."""
import re

import pytest
from django.utils.html import strip_tags

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import executor
from tests.durable import graph_workflows  # noqa: F401 (registers them)
from tests.durable.console.screens import detail_url, run_in

pytestmark = pytest.mark.django_db


def svg_of(html: str) -> str:
    found = re.search(r"<svg class=\"graph\".*?</svg>", html, re.S)
    assert found, "the page has no graph"
    return found.group(0)


def node_classes(svg: str) -> dict[str, str]:
    return {name: cls for cls, name in re.findall(r'<g class="(graph-node[^"]*)" data-step="([^"]+)">', svg)}


def edge_titles(svg: str) -> list[str]:
    return re.findall(r"<polyline [^>]*><title>(.*?)</title></polyline>", svg)


def test_a_loop_is_drawn_with_a_node_per_step_its_routes_and_its_visits(viewer):
    run, _ = services.start_run(workflow="test-loop", input={"limit": 3}, business_key="loop-1", version=2,
                                allow_older_version=True)
    executor.advance(run.id)
    svg = svg_of(viewer.get(detail_url(run)).content.decode())
    assert list(node_classes(svg)) == ["think", "check", "answer", "end"]
    titles = edge_titles(svg)
    assert "think → think (a declared route, taken 3 times)" in titles  # the self-loop
    assert "think → answer (a declared route, taken 1 time)" in titles  # skips `check`: drawn on the side
    assert "think → check (a declared route, not taken)" in titles
    assert "check → think (a declared route, not taken)" in titles  # a loop back
    assert "answer → end (the end after the last step, taken 1 time)" in titles
    assert 'class="graph-edge graph-edge-self graph-edge-taken"' in svg
    assert 'class="graph-edge graph-edge-lane graph-edge-taken"' in svg
    assert ">4 visits</text>" in svg and ">1 visit</text>" in svg and ">not visited</text>" in svg
    assert "graph-current" in node_classes(svg)["end"]  # the run succeeded: it is at the end
    assert "graph-current" not in node_classes(svg)["think"]


def test_the_step_the_run_is_at_is_marked_and_said_in_words(viewer):
    run = run_in(RunStatus.WAITING_RETRY, workflow="test-branch", current_step="refund")
    html = viewer.get(detail_url(run)).content.decode()
    svg = svg_of(html)
    assert "graph-current" in node_classes(svg)["refund"]
    assert [name for name, cls in node_classes(svg).items() if "graph-current" in cls] == ["refund"]
    assert "the run is now at refund." in svg  # the <desc> a screen reader reads
    assert "refund (now)" in strip_tags(html)  # and the table
    assert re.search(r'data-step="refund">\s*<title>refund: 0 visits finished, refund #1 under way \(the run is here\)', svg)
    assert ">#1 now</text>" in svg


def test_side_effects_and_a_finish_from_the_middle_are_drawn(viewer):
    run, _ = services.start_run(workflow="test-branch", input={"kind": "refund"}, business_key="b-1")
    executor.advance(run.id)
    svg = svg_of(viewer.get(detail_url(run)).content.decode())
    assert "refund → end (finished from this step, taken 1 time)" in edge_titles(svg)
    assert "reply → end (the end after the last step, not taken)" in edge_titles(svg)
    assert "graph-visited" not in node_classes(svg)["reply"]


def test_the_graph_says_which_steps_perform_side_effects_and_asked_for_approvals(demo, viewer):
    from tests.approvals.flow import waiting_claim
    from tests.durable.claims import advance
    run = advance(waiting_claim()[0])
    html = viewer.get(detail_url(run)).content.decode()
    svg = svg_of(html)
    assert re.search(r'data-step="payment">.*?side effects: refund.*?</g>', svg, re.S)
    assert re.search(r'data-step="payment">.*?⚡ refund.*?</g>', svg, re.S)
    approving = [name for name, body in re.findall(r'data-step="([^"]+)">(.*?)</g>', svg, re.S)
                 if "asked for an approval" in body]
    assert approving == [run.current_step]
    assert "graph-current" in node_classes(svg)[run.current_step]


def test_a_run_pinned_to_an_older_graph_draws_its_own_not_the_code_of_today(viewer):
    run, _ = services.start_run(workflow="test-loop", input={"limit": 1}, business_key="old-1", version=1,
                                allow_older_version=True)
    executor.advance(run.id)
    svg = svg_of(viewer.get(detail_url(run)).content.decode())
    assert list(node_classes(svg)) == ["think", "answer", "end"]  # v2 has `check` between them
    assert "think → check" not in svg
    # The drawing reads the topology recorded on the run, whatever the registered code says.
    Run.objects.filter(id=run.id).update(topology=[{"step": "think", "side_effects": ["refund"],
                                                    "routes": ["answer", "think"]},
                                                   {"step": "review", "side_effects": []},
                                                   {"step": "answer", "side_effects": []}])
    svg = svg_of(viewer.get(detail_url(run)).content.decode())
    assert list(node_classes(svg)) == ["think", "review", "answer", "end"]
    assert "review → answer (the next declared step, not taken)" in edge_titles(svg)
    assert re.search(r'data-step="think">.*?⚡ refund.*?</g>', svg, re.S)


def test_the_picture_is_accessible_and_scales_to_the_screen(viewer):
    run = run_in(RunStatus.PENDING, workflow="test-branch")
    html = viewer.get(detail_url(run)).content.decode()
    svg = svg_of(html)
    width, height = re.search(r'<svg class="graph" viewBox="0 0 (\d+) (\d+)"', svg).groups()
    assert f'width="{width}" height="{height}"' in svg  # its own size, scaled down by console.css to fit
    assert 'role="img"' in svg and "<title id=\"run-graph-title\">" in svg and "<desc id=\"run-graph-desc\">" in svg
    assert "style=" not in svg  # the CSP refuses inline styles: classes only
    table = re.search(r'<details class="graph-table">.*?</details>', html, re.S).group(0)
    assert "<td>triage <strong>(now)</strong></td><td>0 visits finished, triage #1 under way</td><td>refund, reply</td>" in table
    assert "<td>refund</td><td>0 visits finished</td><td>reply (the next step)</td>" in table
    assert "<td>reply</td><td>0 visits finished</td><td>end (the last step)</td>" in table


def test_a_run_whose_recorded_topology_cannot_be_read_has_no_graph_and_still_a_page(viewer):
    run = run_in(RunStatus.PENDING, workflow="test-branch", topology=[{"name": "not a shape"}])
    response = viewer.get(detail_url(run))
    assert response.status_code == 200 and "run-graph" not in response.content.decode()


def test_a_migrated_run_draws_the_graph_it_was_moved_to_and_its_migration_checkpoint_is_no_route(viewer, operator):
    from durable import versions
    run, _ = services.start_run(workflow="test-loop", input={"limit": 1}, business_key="moved-1", version=1,
                                allow_older_version=True)
    Run.objects.filter(id=run.id).update(status=RunStatus.BLOCKED_VERSION)
    run = versions.migrate_run(run_id=run.id, to_version=2, user=operator, source="test", reason="v2 deployed")
    executor.advance(run.id)
    svg = svg_of(viewer.get(detail_url(run)).content.decode())
    assert list(node_classes(svg)) == ["think", "check", "answer", "end"]
    assert "think → think (a declared route, taken 1 time)" in edge_titles(svg)
    assert len(edge_titles(svg)) == 5  # the graph's own routes: the migration's checkpoint drew none
