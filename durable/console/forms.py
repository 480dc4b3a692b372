"""What the run screens accept: the runs list's query, and an operator's confirmed action on a run."""
from __future__ import annotations

from datetime import datetime
from typing import Any, cast
from uuid import UUID

from django import forms
from rest_framework import serializers

from durable.api.filters import RunFilterSerializer
from durable.console import paging
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


class RunsQuery(RunFilterSerializer):
    """The API's run filters, plus the console's page marker."""

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
