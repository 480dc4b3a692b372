"""The console's one search box: what a search finds, by one rule, and only what the searcher may see.

A search names a run, an approval request (their UUIDs) or an operation (its 32-hex id) exactly, or
holds a fragment, in any case, of a run's business key or of one of the input fields its workflow
declares searchable (`Workflow.searchable`). Fragments are matched in durable_runsearch, written once
per run at its start (services.start_run): on Postgres a LIKE read from its trigram indexes, elsewhere
a plain LIKE. What a searcher sees follows their own pages' rules: input fields under the contents rule.
The apps built on the core add what they find by id with `add_finder` from their ready(): approvals a
request by its UUID (approvals/search.py), reconciliation an operation by its id (reconciliation/search.py).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Q
from django.urls import reverse
from rest_framework import serializers

from durable.console.forms import read_page_marker
from durable.engine.ids import OPERATION_ID_PATTERN
from durable.engine.search import LINE, fold
from durable.models import Run, RunSearch
from durable.permissions import Caller, can_see_contents

SHORTEST_FRAGMENT = 3  # a trigram index finds nothing shorter; two letters would match most runs anyway
LONGEST = 200  # a business key's length
OPERATION_ID = re.compile(OPERATION_ID_PATTERN)
LISTED = ("run__id", "run__workflow_name", "run__workflow_version", "run__business_key", "run__status",
          "run__created_at", "created_at", "business_key", "field_text", "fields")


class SearchQuery(serializers.Serializer):
    q = serializers.CharField(max_length=LONGEST, label="search", help_text="a run, approval or operation id, "
                              "or a part of a business key or of a searchable field")
    after = serializers.CharField(required=False)

    def validate_q(self, value: str) -> str:
        if LINE in value or "\r" in value:
            raise serializers.ValidationError("search one line at a time")
        if len(value) < SHORTEST_FRAGMENT and not _is_id(value):
            raise serializers.ValidationError(f"type at least {SHORTEST_FRAGMENT} characters")
        return value

    def validate_after(self, value: str) -> tuple[datetime, UUID]:
        return read_page_marker(value)


@dataclass(frozen=True)
class Hit:
    """One thing found: its page, what kind of thing it is, what matched, and its run."""

    kind: str  # "run", "approval" or "operation"
    url: str
    matched: str  # "run id", "business key", a searchable field's name...
    value: str  # the text that matched, as stored (not lower-cased)
    run: Run


@dataclass(frozen=True)
class Found:
    exact: list[Hit]  # by id: on the first page only
    runs: list[Hit]  # by a fragment: one page, newest run first
    more: bool  # another page of runs follows

    @property
    def hits(self) -> list[Hit]:
        return self.exact + self.runs

    @property
    def single(self) -> Hit | None:
        """The one hit, when there is exactly one: the console opens it instead of listing it."""
        return self.hits[0] if len(self.hits) == 1 and not self.more else None


# Given the folded text and the searcher, a finder returns what it names exactly and the searcher may see.
Finder = Callable[[str, Caller], list[Hit]]
_finders: dict[str, Finder] = {}


def add_finder(name: str, finder: Finder) -> None:
    """Called from an app's ready(): its hits follow the runs' in the order the apps were installed."""
    _finders[name] = finder


def search(text: str, user: Caller, *, after: tuple[datetime, UUID] | None = None, size: int) -> Found:
    text = fold(text.strip())
    exact = [] if after is not None else _by_id(text, user)
    if exact or len(text) < SHORTEST_FRAGMENT:
        return Found(exact, [], False)  # an id that names something is that thing, not a part of a key
    runs = _by_fragment(text, can_see_contents(user), after, size + 1)
    return Found(exact, runs[:size], len(runs) > size)


def _is_id(text: str) -> bool:
    return as_uuid(fold(text.strip())) is not None or bool(OPERATION_ID.fullmatch(fold(text.strip())))


def as_uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def _by_id(text: str, user: Caller) -> list[Hit]:
    hits = []
    run_id = as_uuid(text)
    if run_id is not None:
        for run in Run.objects.filter(id=run_id).only("id", "workflow_name", "workflow_version", "business_key",
                                                       "status", "created_at"):
            hits.append(Hit("run", reverse("durable:run-detail", args=[run.id]), "run id", str(run.id), run))
    for finder in _finders.values():
        hits.extend(finder(text, user))
    return hits


def _by_fragment(text: str, with_fields: bool, after: tuple[datetime, UUID] | None, limit: int) -> list[Hit]:
    matches = Q(business_key__contains=text)
    if with_fields:  # the input's fields are a run's contents (durable/permissions.py)
        matches |= Q(field_text__contains=text)
    rows = RunSearch.objects.filter(matches)
    if after is not None:
        created_at, run_id = after
        rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, run_id__lt=run_id))
    rows = rows.select_related("run").only(*LISTED).order_by("-created_at", "-run_id")
    return [_hit(row, text) for row in rows[:limit]]


def _hit(row: RunSearch, text: str) -> Hit:
    run = row.run
    url = reverse("durable:run-detail", args=[run.id])
    if text in row.business_key:
        return Hit("run", url, "business key", run.business_key, run)
    name, value = next(((name, value) for name, value in row.fields.items() if text in fold(value)), ("", ""))
    return Hit("run", url, name, value, run)
