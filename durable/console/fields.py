"""Form fields shared by the console's forms: a reason whose limit the page shows as it is typed, and a JSON object."""
from __future__ import annotations

from typing import Any

from django import forms

from durable.engine.json_values import UnstorableJSON, parse_json
from durable.engine.limits import REASON_MAX_LENGTH

TOO_LONG = ("A reason holds at most %(limit_value)s characters and this one has %(show_value)s: "
            "shorten it and send it again. Nothing was done.")


class LimitedTextarea(forms.Textarea):
    """A textarea followed by its limit: "at most 4,000 characters" without JavaScript, and a live count
    (durable/static/durable/limits.js) that blocks the submit while the text is over the limit."""

    template_name = "durable/_limited_textarea.html"

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        limit = context["widget"]["attrs"].get("maxlength")
        context["widget"]["limit"] = f"{int(limit):,}" if limit else ""
        return context


class ReasonField(forms.CharField):
    """A reason kept whole in the audit trail: over REASON_MAX_LENGTH is a form error naming the field."""

    widget = LimitedTextarea

    def __init__(self, *, rows: int = 2, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("error_messages", {"max_length": TOO_LONG})
        super().__init__(max_length=REASON_MAX_LENGTH, **kwargs)
        self.widget.attrs["rows"] = str(rows)

    def to_python(self, value: Any) -> str:
        # Line breaks as the page counted them (one each), so what fits the counter fits the limit.
        return (super().to_python(value) or "").replace("\r\n", "\n")  # None only with empty_value=None


def json_object(text: str, *, example: str) -> dict[str, Any]:
    """A form's JSON object, under the API's rules too (finite numbers, no NUL, no lone surrogate, bounded depth);
    else a ValidationError saying what is wrong, with `example` of what is expected."""
    try:
        value = parse_json(text)
    except UnstorableJSON as exc:
        raise forms.ValidationError(str(exc)) from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"must be a JSON object, e.g. {example}")
    return value
