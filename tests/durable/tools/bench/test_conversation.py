"""durable_bench --conversation: its workflow appends a turn a visit, and what it reports is computed from the
run's checkpoints and the database's size, never asserted as a timing."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable import services
from durable.engine.states import RunStatus
from durable.store.checkpoints import state_at
from durable.tools.bench import conversation
from durable.tools.bench.conversation import ConversationCost, database_bytes, turn_text, visit_intervals_ms
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_conversation_appends_one_turn_a_visit_and_ends_with_a_small_output():
    run, _ = services.start_run(workflow=conversation.WORKFLOW, business_key="c",
                                input={"turns": 25, "turn_bytes": 100})
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.checkpoint_seq == 25
    assert state_at(run.id, 25)["messages"] == [turn_text(n, 100) for n in range(25)]
    assert run.output == {"turns": 25}  # not the conversation again
    assert len(visit_intervals_ms(run.id)) == 24  # from the first visit's checkpoint on
    assert database_bytes() > 0


def test_the_report_puts_growth_beside_the_conversation_and_the_last_visits_beside_the_first():
    cost = ConversationCost("durable", turns=200, turn_bytes=4000, grown_bytes=1_440_000,
                            visit_ms=[10.0] * 10 + [50.0] * 180 + [5.0] * 10)
    assert (cost.conversation_bytes, round(cost.growth_ratio, 2), cost.time_ratio) == (800_000, 1.8, 0.5)
    assert "1.80 x the conversation" in cost.line() and "= 0.50 x" in cost.line()
    assert ConversationCost("DBOS", 200, 4000, 0, [], note="not installed").line().split() == ["DBOS", "not",
                                                                                                "installed"]
    assert turn_text(3, 50) == turn_text(3, 50) != turn_text(4, 50) and len(turn_text(3, 50)) == 50


def test_with_large_bytes_each_visit_appends_the_same_tool_result_stored_once():
    from durable.models import StoredValue

    run, _ = services.start_run(workflow=conversation.WORKFLOW, business_key="large",
                                input={"turns": 5, "turn_bytes": 100, "large_bytes": 70_000})
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output == {"turns": 5}
    document = conversation.read_document(70_000)
    assert state_at(run.id, 5)["messages"] == [item for n in range(5) for item in (turn_text(n, 100), document)]
    assert list(StoredValue.objects.values_list("size", flat=True)) == [70_002]  # over 64 KB: once, as JSON text
    assert ConversationCost("durable", 5, 100, 0, [], large_bytes=70_000).conversation_bytes == 350_500


@pytest.mark.parametrize("arguments", [["--conversation", "3"], ["--turn-bytes", "0"], ["--large-bytes", "-1"]])
def test_a_conversation_too_short_or_a_size_below_its_least_is_refused_before_anything_starts(arguments):
    given = {"--conversation": "20", "--turn-bytes": "100", "--large-bytes": "0"}
    given.update(dict(zip(arguments[::2], arguments[1::2], strict=True)))
    with pytest.raises(CommandError, match="--conversation takes at least"):
        call_command("durable_bench", "--skip-checks", *[part for pair in given.items() for part in pair])
