"""The console's one search box: what a search finds, by one rule, and only what the searcher may see.

A search names a run, an approval request (their UUIDs) or an operation (its 32-hex id) exactly, or
holds a fragment, in any case, of a run's business key or of one of the input fields its workflow
declares searchable (`Workflow.searchable`). Fragments are matched in durable_runsearch, written once
per run at its start (services.start_run): on Postgres a LIKE read from its trigram indexes, elsewhere
a plain LIKE. What a searcher sees follows their own pages' rules: approvals with
approvals.view_approvalrequest, operations and input fields under the contents rule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Q
from django.urls import reverse
from rest_framework import serializers

from approvals.models import ApprovalRequest
from durable.permissions import Caller
from durable.console.forms import read_page_marker
from durable.engine.ids import OPERATION_ID_PATTERN
from durable.engine.search import LINE, fold
from durable.models import Run, RunSearch, SideEffect
from durable.permissions import can_see_contents

SHORTEST_FRAGMENT = 3  # a trigram index finds nothing shorter; two letters would match most runs anyway
LONGEST = 200  # a business key's length
VIEW_APPROVALS = "approvals.view_approvalrequest"
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


def search(text: str, user: Caller, *, after: tuple[datetime, UUID] | None = None, size: int) -> Found:
    text = fold(text.strip())
    exact = [] if after is not None else _by_id(text, user)
    if exact or len(text) < SHORTEST_FRAGMENT:
        return Found(exact, [], False)  # an id that names something is that thing, not a part of a key
    runs = _by_fragment(text, can_see_contents(user), after, size + 1)
    return Found(exact, runs[:size], len(runs) > size)


def _is_id(text: str) -> bool:
    return _uuid(fold(text.strip())) is not None or bool(OPERATION_ID.fullmatch(fold(text.strip())))


def _uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def _by_id(text: str, user: Caller) -> list[Hit]:
    hits = []
    as_uuid = _uuid(text)
    if as_uuid is not None:
        for run in Run.objects.filter(id=as_uuid).only("id", "workflow_name", "workflow_version", "business_key",
                                                        "status", "created_at"):
            hits.append(Hit("run", reverse("durable:run-detail", args=[run.id]), "run id", str(run.id), run))
        if user.has_perm(VIEW_APPROVALS):
            for approval in ApprovalRequest.objects.filter(id=as_uuid).select_related("run"):
                hits.append(Hit("approval", reverse("approvals:detail", args=[approval.id]), "approval id",
                                f"{approval.kind}, {approval.status}", approval.run))
    if OPERATION_ID.fullmatch(text) and can_see_contents(user):
        for operation in SideEffect.objects.filter(operation_id=text).select_related("run"):
            hits.append(Hit("operation", reverse("reconciliation:operation", args=[operation.operation_id]),
                            "operation id", f"{operation.action_name}, {operation.status}", operation.run))
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
