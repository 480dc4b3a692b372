"""What the notifications page accepts: the events a user wants, and the channels to reach them on."""
from __future__ import annotations

from typing import Any

from django import forms

from durable.notifications.models import EVENT_CHOICES, Channel


class NotificationPreferencesForm(forms.Form):
    events = forms.MultipleChoiceField(choices=EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
                                       label="Tell me when")
    channels = forms.MultipleChoiceField(choices=Channel.choices, required=False,
                                         widget=forms.CheckboxSelectMultiple, label="By")

    def __init__(self, *args: Any, available: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.available = available

    def clean_channels(self) -> list[str]:
        chosen = self.cleaned_data["channels"]
        unreachable = [Channel(channel).label for channel in chosen if channel not in self.available]
        if unreachable:
            raise forms.ValidationError(
                f"{', '.join(unreachable)} cannot reach you: email needs an address on your account, the "
                "webhook an endpoint set by whoever runs durable (DURABLE_NOTIFY_WEBHOOK_URL). Nothing was saved.")
        return chosen
