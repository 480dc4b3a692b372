"""Structured logs: engine lines carry their run, workflow, version, step, attempt and operation."""
import json
import logging

import pytest
from celery.signals import setup_logging
from django.conf import settings

from durable import logs, services
from durable.logs import FIELDS, JsonFormatter, RunContextFilter, TextFormatter
from durable.models import SideEffect
from durable.project.celery import _use_django_logging
from durable.project.settings import log_format
from durable.runtime import executor
from tests.durable.ledger_workflows import probe


class Captured(logging.Handler):
    """A handler like the configured one: the run-context filter, then keep the record."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(RunContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def first(self, text: str) -> logging.LogRecord:
        return next(r for r in self.records if text in r.getMessage())


@pytest.fixture
def captured():
    handler, root = Captured(), logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


def fields(record: logging.LogRecord) -> dict:
    return {name: getattr(record, name) for name in FIELDS}


@pytest.mark.django_db
def test_a_line_written_inside_a_step_carries_the_run_workflow_version_step_and_attempt(captured, calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, "fail_times": 1},
                                business_key="k")
    executor.advance(run.id)
    line = captured.first("step s2 failed")
    assert fields(line) == {"run_id": str(run.id), "workflow": "test-counting", "version": 1, "step": "s2",
                            "attempt": 0, "operation_id": None}


@pytest.mark.django_db
def test_a_line_written_inside_a_side_effect_carries_its_operation_id(captured):
    probe.reset()
    run, _ = services.start_run(workflow="test-ledger-probe", input={}, business_key="B-1")
    executor.advance(run.id)
    line = captured.first("charge succeeded on probe")
    assert fields(line) == {"run_id": str(run.id), "workflow": "test-ledger-probe", "version": 1, "step": "charge",
                            "attempt": 0, "operation_id": SideEffect.objects.get(run=run).operation_id}


def test_any_logger_inside_a_bound_block_gets_the_fields_and_outside_none(captured):
    with logs.bound(run_id="r-1", step="payment"), logs.bound(operation_id="op-1"):
        logging.getLogger("httpx").warning("a library's line")
    logging.getLogger("httpx").warning("after the run")
    inside, outside = captured.first("a library's line"), captured.first("after the run")
    assert (inside.run_id, inside.step, inside.operation_id) == ("r-1", "payment", "op-1")
    assert (outside.run_id, outside.step) == (None, None)


def test_a_field_passed_in_extra_wins_over_the_bound_one(captured):
    with logs.bound(run_id="bound"):
        logging.getLogger("durable.test").warning("explicit", extra={"run_id": "explicit"})
    assert captured.first("explicit").run_id == "explicit"


def record_in_a_step(message="refund sent", exc_info=None):
    record = logging.LogRecord("durable.side_effects", logging.INFO, __file__, 1, message, (), exc_info)
    record.activity = "orders.get"
    with logs.bound(run_id="r-1", workflow="claims-agent", version=2, step="payment", attempt=1, operation_id="ab" * 16):
        RunContextFilter().filter(record)
    return record


def test_the_json_formatter_writes_one_json_object_with_every_field():
    entry = json.loads(JsonFormatter().format(record_in_a_step()))
    assert {k: entry[k] for k in ("level", "logger", "message", *FIELDS, "activity")} == {
        "level": "INFO", "logger": "durable.side_effects", "message": "refund sent", "run_id": "r-1",
        "workflow": "claims-agent", "version": 2, "step": "payment", "attempt": 1, "operation_id": "ab" * 16,
        "activity": "orders.get"}
    assert entry["time"].endswith("+00:00")


def test_the_json_formatter_keeps_a_traceback_on_the_same_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        line = JsonFormatter().format(record_in_a_step("failed", sys.exc_info()))
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["exception"]


def test_a_line_outside_any_run_has_the_fields_as_null():
    record = logging.LogRecord("durable.sweeper", logging.INFO, __file__, 1, "swept", (), None)
    RunContextFilter().filter(record)
    entry = json.loads(JsonFormatter().format(record))
    assert all(entry[name] is None for name in FIELDS)


def test_the_text_formatter_appends_the_fields_the_line_has():
    line = TextFormatter().format(record_in_a_step())
    assert line.endswith(f"INFO durable.side_effects refund sent [run_id=r-1 workflow=claims-agent version=2 "
                         f"step=payment attempt=1 operation_id={'ab' * 16}]")


# Which format, and the same configuration in Celery workers


@pytest.mark.parametrize("environ,debug,expected", [
    ({}, False, "text"),  # the demo
    ({"DATABASE_URL": "postgres://db/durable"}, False, "json"),  # production
    ({"DATABASE_URL": "postgres://db/durable"}, True, "text"),
    ({"DURABLE_LOG_FORMAT": "json"}, False, "json"),
    ({"DURABLE_LOG_FORMAT": "TEXT", "DATABASE_URL": "postgres://db/durable"}, False, "text"),
])
def test_the_format_is_json_in_production_and_text_in_the_demo_unless_chosen(environ, debug, expected):
    assert log_format(environ, debug) == expected


def test_an_unknown_format_is_refused_naming_the_choices():
    with pytest.raises(RuntimeError, match="'json' or 'text'"):
        log_format({"DURABLE_LOG_FORMAT": "xml"}, False)


def test_the_configured_handler_adds_the_fields_in_the_chosen_format():
    handler = settings.LOGGING["handlers"]["console"]
    assert handler["filters"] == ["run_context"] and handler["formatter"] == settings.DURABLE_LOG_FORMAT
    assert settings.LOGGING["root"]["handlers"] == ["console"]


def test_celery_workers_log_through_the_same_configuration_instead_of_hijacking_the_root_logger():
    assert any(receiver() is _use_django_logging for _, receiver in setup_logging.receivers)
    celery_logger = logging.getLogger("celery")
    level = celery_logger.level
    try:
        _use_django_logging(loglevel=logging.WARNING)
        [handler] = logging.getLogger().handlers
        assert any(isinstance(f, RunContextFilter) for f in handler.filters)
        assert type(handler.formatter) is {"json": JsonFormatter, "text": TextFormatter}[settings.DURABLE_LOG_FORMAT]
        assert celery_logger.level == logging.WARNING
    finally:
        celery_logger.setLevel(level)
