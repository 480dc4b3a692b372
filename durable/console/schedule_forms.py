"""What the Schedules screens accept: a schedule's definition (new or edited), and a delete's reason and
confirmation. The form reads the fields' shapes; durable/schedules.py checks what they mean together (the cron
expression in its time zone, the input against the workflow's model) and its errors land on the fields they name."""
from __future__ import annotations

from typing import Any

from django import forms

from durable.console.fields import ReasonField, json_object
from durable.console.forms import ActionForm
from durable.engine.schedules import CatchUp, Overlap
from durable.errors import InvalidInput
from durable.labels import LabelledForm
from durable.registry import registry
from durable.schedules import MAX_WINDOW_SECONDS

OVERLAPS = [(Overlap.SKIP.value, "skip while the last run is active"), (Overlap.START_ANYWAY.value, "start anyway")]
CATCH_UPS = [(CatchUp.NONE.value, "none: fire times missed are passed over"),
             (CatchUp.LATEST.value, "the latest missed fire time"),
             (CatchUp.ALL.value, "all missed fire times within the window")]


class ScheduleForm(LabelledForm, forms.Form):
    """A schedule made or edited here: the fields of POST /api/schedules/, as a page shows them."""

    name = forms.CharField(max_length=100, help_text="unique: letters, digits, '-', '_' or '.'")
    workflow = forms.ChoiceField(choices=())
    cron = forms.CharField(max_length=200, label="Cron expression",
                           help_text="five fields: minute hour day-of-month month day-of-week, e.g. 30 2 * * *")
    time_zone = forms.CharField(max_length=64, initial="UTC", label="Time zone",
                                help_text="an IANA name the expression is read in: Europe/Paris, UTC")
    input = forms.CharField(initial="{}", required=False, label="Input (JSON)",
                            help_text="each run's input, a JSON object checked against the workflow's input model",
                            widget=forms.Textarea(attrs={"rows": 4}))
    business_key_template = forms.CharField(max_length=200, required=False, label="Business key template",
                                            help_text="with {schedule} and {fire_time:%Y-%m-%d}; empty: "
                                                      "<name>:{fire_time:%Y-%m-%dT%H:%M}")
    overlap = forms.ChoiceField(choices=OVERLAPS, initial=Overlap.SKIP.value)
    catch_up = forms.ChoiceField(choices=CATCH_UPS, initial=CatchUp.LATEST.value, label="Catch-up after downtime")
    catch_up_window = forms.IntegerField(min_value=1, max_value=MAX_WINDOW_SECONDS, initial=86400,
                                         label="Catch-up window (seconds)",
                                         help_text="how far back 'all' catches up")
    paused = forms.BooleanField(required=False, help_text="made paused: it fires once resumed")

    def __init__(self, *args: Any, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted(registry.names())
        self.fields["workflow"].choices = [(name, name) for name in names]  # type: ignore[attr-defined]
        if editing:  # a schedule's name is its identity (and its runs' business keys): kept as made
            del self.fields["name"]
            self.fields["business_key_template"].required = True

    def clean_input(self) -> dict[str, Any]:
        return json_object(self.cleaned_data["input"].strip() or "{}", example='{"region": "eu"}')

    def service_errors(self, exc: InvalidInput) -> None:
        """The service's errors on the fields they name (the input's, field by field, under Input)."""
        for name, errors in exc.errors.items():
            if isinstance(errors, dict):  # the input model's errors, by the input's own fields
                errors = [f"{field}: {' '.join(map(str, messages))}" for field, messages in errors.items()]
            self.add_error(name if name in self.fields else None, errors)


class DeleteScheduleForm(ActionForm):
    """Delete a schedule: a reason kept in the audit trail, and the "I confirm" box."""

    reason = ReasonField()
