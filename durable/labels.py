"""The words an operator reads for each field the console's forms and the API accept: one table for both.

A 400 names a field by its label ("External reference: required when..."), never by the internal
name it is sent as (`external_ref`); an API body keeps the internal name as its key, for clients.
"""
from __future__ import annotations

from typing import Any

from django import forms

FIELD_LABELS: dict[str, str] = {
    # runs
    "workflow": "Workflow", "version": "Version", "business_key": "Business key", "status": "Status",
    "created_after": "Created on or after", "created_before": "Created before", "q": "Find a run",
    "input": "Input", "idempotency_key": "Idempotency key", "after": "Page", "run": "Run",
    "reason": "Reason", "confirm": "Confirmation", "to_version": "To version", "from_version": "From version",
    "priority": "Priority", "checkpoint": "Checkpoint", "state": "State (JSON object)",
    # approvals
    "kind": "Kind", "verdict": "Decision", "snapshot_hash": "Snapshot you saw", "tab": "Queue",
    # reconciliation
    "outcome": "Outcome", "external_ref": "External reference", "result": "Result (JSON object)",
    "follow_up": "If it did not happen", "operation_id": "Operation id", "action": "Action",
    # audit
    "actor": "Actor", "source": "Source", "since": "From", "until": "To", "bulk": "Bulk id",
    # tokens and preferences
    "name": "Name", "days": "Expires in (days)", "owner": "For user", "expires_at": "Expires",
    "time_zone": "Time zone", "from_browser": "Sent by the browser",
    # bulk actions and notifications
    "runs": "Runs", "events": "Events", "channels": "Channels",
    # what runs cost
    "tokens": "LLM-token budget", "cost": "Cost budget", "cost_min": "Cost at least",
    "tokens_min": "LLM tokens at least",
    "order": "Order", "waiting_on_budget": "Waiting on budget",
}


def label_for(name: str) -> str:
    """The operator's word for field `name`; "" for errors about the whole form (Django's __all__, DRF's)."""
    if name in ("__all__", "non_field_errors"):
        return ""
    return FIELD_LABELS.get(name) or name.replace("_", " ").capitalize()


def labelled(errors: Any) -> Any:
    """A 400 body with each field's messages led by its label: {"external_ref": ["External reference: ..."]}."""
    if not isinstance(errors, dict):
        return errors
    return {name: _lead(label_for(name), messages) for name, messages in errors.items()}


def _lead(label: str, messages: Any) -> Any:
    if not label or not isinstance(messages, list):
        return messages  # a nested object's errors (a run's input) keep their own keys
    return [f"{label}: {m}" if isinstance(m, str) and not m.startswith(f"{label}:") else m for m in messages]


class LabelledForm:
    """A form mixin: each field without its own label takes the table's, so no form shows an internal name."""

    fields: dict[str, forms.Field]  # the form's, which this mixes into

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if field.label is None:
                field.label = label_for(name)
