"""What the apps built on the core add to a run's page: a section each, and the current status of what the
run's timeline names of theirs (approvals: its requests, shown beside each approval event).

An app registers a `RunSection` from its AppConfig.ready(); the page renders the sections in the order the
apps were installed, after the run's own.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durable.models import Run


def _no_statuses(run: Run) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class RunSection:
    template: str  # rendered with `section` (what `read` returned) in its context
    read: Callable[[Run], Any]
    statuses: Callable[[Run], dict[str, str]] = _no_statuses  # the id a journal entry names -> its status now


_sections: dict[str, RunSection] = {}


def add_run_section(name: str, section: RunSection) -> None:
    """Called from an app's ready(); a second call with the same name replaces the first."""
    _sections[name] = section


def run_sections(run: Run) -> list[tuple[str, Any]]:
    """(template, what it shows) for each registered section."""
    return [(section.template, section.read(run)) for section in _sections.values()]


def current_statuses(run: Run) -> dict[str, str]:
    return {key: status for section in _sections.values() for key, status in section.statuses(run).items()}
