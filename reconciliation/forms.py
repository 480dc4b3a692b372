"""What the resolution form accepts; the rules of a resolution stay in reconciliation.services."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django import forms

from durable.console.fields import ReasonField
from durable.console.paging import read_page_marker
from durable.engine.json_values import UnstorableJSON, parse_json
from durable.labels import LabelledForm
from reconciliation.services import DID_NOT_HAPPEN, FAIL, RETRY, SUCCEEDED

OPERATION_ID = re.compile(r"[0-9a-f]{32}")


class ResolveForm(LabelledForm, forms.Form):
    outcome = forms.ChoiceField(widget=forms.RadioSelect, choices=[
        (SUCCEEDED, "It happened: record the downstream's reference"),
        (DID_NOT_HAPPEN, "It did not happen"),
    ])
    external_ref = forms.CharField(required=False, max_length=200, label="External reference",
                                   help_text="required when it happened: the downstream's own id for it")
    result = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), label="Result (JSON object)",
                             help_text="optional: what the step receives as the downstream's answer")
    follow_up = forms.ChoiceField(required=False, widget=forms.RadioSelect, label="If it did not happen", choices=[
        (RETRY, "send it again with the same key"),
        (FAIL, "fail the step"),
    ])
    # Optional here: the service says a reason is required, in one place for the console and the API.
    reason = ReasonField(rows=3, help_text="the evidence the resolution rests on")

    def clean_result(self) -> dict[str, Any] | None:
        text = self.cleaned_data["result"].strip()
        if not text:
            return None
        try:
            value = parse_json(text)  # the API's rules too: finite numbers, no NUL, no lone surrogate, bounded depth
        except UnstorableJSON as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object, e.g. {\"notification_id\": \"ntf-1\"}")
        return value


def _operation_id(value: str) -> str:
    if not OPERATION_ID.fullmatch(value):
        raise ValueError(value)
    return value


class QueuePage(LabelledForm, forms.Form):
    """Which page of the reconciliation queue: just after the (updated_at, operation id) of the last row shown."""

    after = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_after(self) -> tuple[datetime, str] | None:
        value = self.cleaned_data["after"]
        if not value:
            return None
        marker = read_page_marker(value, _operation_id)
        if marker is None:
            raise forms.ValidationError("not a page of this queue; start again from the first page")
        return marker
