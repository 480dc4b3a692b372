"""What the run screens accept: the runs list's query, and an operator's confirmed action on a run."""
from __future__ import annotations

from typing import Any, cast
from uuid import UUID

from django import forms
from django.db.models import QuerySet
from rest_framework import serializers

from durable.api.filters import RunFilterSerializer, filter_runs, position
from durable.console import paging
from durable.console.fields import ReasonField
from durable.engine.costs import COST_DECIMALS, COST_DIGITS, MAX_TOKENS
from durable.engine.json_values import UnstorableJSON, parse_json
from durable.engine.states import WAITING_STATES, RunStatus
from durable.engine.waits import WaitKind
from durable.labels import LabelledForm
from durable.models import Run

NOT_A_PAGE = "not a page of this list; start again from the first page"


def page_marker(run: Run, order: str = "newest") -> str:
    """Where the next page of runs starts: just after this run in the list's order ((-created_at, -id) by default,
    else (-cost, -id) or (-tokens, -id))."""
    if order == "newest":
        return paging.page_marker(run.created_at, run.id)
    return f"{getattr(run, order)}{paging.SEPARATOR}{run.id}"


def read_page_marker(value: str, order: str = "newest") -> tuple[Any, UUID]:
    """The (created_at or cost or tokens, run id) a page_marker wrote; anything else is a validation error."""
    if order == "newest":
        marker = paging.read_page_marker(value, UUID)
        if marker is None:
            raise serializers.ValidationError(NOT_A_PAGE)
        return marker
    key, _, run_id = value.partition(paging.SEPARATOR)
    try:
        return position(order, key), UUID(run_id)
    except ValueError:
        raise serializers.ValidationError(NOT_A_PAGE) from None


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
    """The API's run filters and orders, plus the console's page marker (read in the order it was written for)."""

    after = serializers.CharField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "after" in attrs:
            try:
                attrs["after"] = read_page_marker(attrs["after"], attrs.get("order") or "newest")
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"after": exc.detail}) from None
        return attrs


class ActionForm(LabelledForm, forms.Form):
    reason = ReasonField()
    # The confirmation step, kept by the server: an unticked box is a 400 and nothing happens.
    confirm = forms.BooleanField(error_messages={"required": "tick “I confirm” to go ahead; nothing was done"})


class BudgetForm(ActionForm):
    """Raise a stopped run's budget: a new limit for what stopped it (or both), each above what it used."""

    tokens = forms.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
    cost = forms.DecimalField(min_value=0, max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, required=False)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("tokens") is None and cleaned.get("cost") is None and not self.has_error("tokens") \
                and not self.has_error("cost"):
            self.add_error("tokens", "give the new LLM-token budget, the new cost budget, or both")
        return cleaned


class ForkForm(ActionForm):
    """A fork from one of the run's checkpoints (the "Fork from here" form on it): a newer version, an edited state."""

    checkpoint = forms.IntegerField(min_value=0, max_value=2**31 - 1, widget=forms.HiddenInput)
    version = forms.IntegerField(min_value=1, max_value=2**31 - 1, required=False,
                                 help_text="leave empty for the run's own version")
    state = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=True,
                            help_text="a JSON object, the checkpoint's state edited; leave empty to keep it")

    def clean_state(self) -> dict[str, Any] | None:
        text = self.cleaned_data.get("state") or ""
        if not text:
            return None
        try:
            value = parse_json(text)
        except UnstorableJSON as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("the state is a JSON object, as the state model reads it")
        return value


class MigrateForm(ActionForm):
    to_version = forms.TypedChoiceField(coerce=int, choices=())

    def __init__(self, *args: Any, versions: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.TypedChoiceField, self.fields["to_version"]).choices = [(v, f"v{v}") for v in versions]
