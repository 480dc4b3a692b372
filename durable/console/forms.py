"""What the run screens accept: the runs list's query, and an operator's confirmed action on a run."""
from __future__ import annotations

from datetime import datetime
from typing import Any, cast
from uuid import UUID

from django import forms
from django.db.models import QuerySet
from rest_framework import serializers

from durable.api.filters import RunFilterSerializer, filter_runs
from durable.console import paging
from durable.engine.states import WAITING_STATES, RunStatus
from durable.engine.waits import WaitKind
from durable.labels import LabelledForm
from durable.console.fields import ReasonField
from durable.models import Run

def page_marker(run: Run) -> str:
    """Where the next page of runs starts: just after this run in (-created_at, -id) order."""
    return paging.page_marker(run.created_at, run.id)


def read_page_marker(value: str) -> tuple[datetime, UUID]:
    """The (created_at, run id) a page_marker wrote; anything else is a validation error."""
    marker = paging.read_page_marker(value, UUID)
    if marker is None:
        raise serializers.ValidationError("not a page of this list; start again from the first page")
    return marker


# The runs list's "any waiting" status: every status in which a run waits for something, in the state machine's order.
ANY_WAITING = ",".join(status.value for status in RunStatus if status in WAITING_STATES)


class ConsoleRunFilter(RunFilterSerializer):
    """The API's run filters, and what a WAITING run waits for: the runs list's filters, and a bulk action's."""

    waiting = serializers.ChoiceField(choices=[kind.value for kind in WaitKind], required=False,
                                      help_text="WAITING runs parked on a timer, events or child runs")


def filter_console_runs(queryset: QuerySet[Run], params: dict[str, Any]) -> QuerySet[Run]:
    """The runs matching the runs list's validated filters."""
    queryset = filter_runs(queryset, params)
    if params.get("waiting"):
        queryset = queryset.filter(status=RunStatus.WAITING, waiting_for__kind=params["waiting"])
    return queryset


class RunsQuery(ConsoleRunFilter):
    """The runs list's filters, plus the console's page marker."""

    after = serializers.CharField(required=False)

    def validate_after(self, value: str) -> tuple[datetime, UUID]:
        return read_page_marker(value)


class ActionForm(LabelledForm, forms.Form):
    reason = ReasonField()
    # The confirmation step, kept by the server: an unticked box is a 400 and nothing happens.
    confirm = forms.BooleanField(error_messages={"required": "tick “I confirm” to go ahead; nothing was done"})


class MigrateForm(ActionForm):
    to_version = forms.TypedChoiceField(coerce=int, choices=())

    def __init__(self, *args: Any, versions: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.TypedChoiceField, self.fields["to_version"]).choices = [(v, f"v{v}") for v in versions]
