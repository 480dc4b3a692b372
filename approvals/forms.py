"""What the approvals screens accept: the inbox filters and a decision."""
from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django import forms

from approvals.selectors import DEFAULT_TAB, TABS
from durable.console.fields import ReasonField
from durable.console.paging import read_page_marker
from durable.engine.approvals import Verdict
from durable.labels import LabelledForm


class InboxFilters(LabelledForm, forms.Form):
    kind = forms.CharField(max_length=100, required=False)
    workflow = forms.CharField(max_length=100, required=False)
    version = forms.IntegerField(min_value=1, required=False)
    business_key = forms.CharField(max_length=200, required=False)
    after = forms.CharField(required=False, widget=forms.HiddenInput)
    tab = forms.ChoiceField(choices=[(name, tab.label) for name, tab in TABS.items()], required=False,
                            initial=DEFAULT_TAB)

    FILTERS = ("kind", "workflow", "version", "business_key")

    def clean_after(self) -> tuple[datetime, UUID] | None:
        value = self.cleaned_data["after"]
        if not value:
            return None
        marker = read_page_marker(value, UUID)  # (expires_at, request id)
        if marker is None:
            raise forms.ValidationError("not a page of this inbox; start again from the first page")
        return marker

    def filters(self) -> dict[str, Any]:
        """The validated filters, for approvals.selectors (which knows nothing of paging)."""
        return {name: self.cleaned_data[name] for name in self.FILTERS}


class DecisionForm(LabelledForm, forms.Form):
    verdict = forms.ChoiceField(choices=[(v.value, v.value) for v in Verdict])
    # Optional here: the service says when a reason is required (to reject), in one place.
    reason = ReasonField()
    snapshot_hash = forms.RegexField(r"^[0-9a-f]{64}$", widget=forms.HiddenInput,
                                     error_messages={"invalid": "the page did not say which snapshot you saw; "
                                                                "reload it and decide again"})
