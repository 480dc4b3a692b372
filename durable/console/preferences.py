"""The preferences page: the time zone an operator reads the console in (their browser's, until they choose)."""
from __future__ import annotations

from http import HTTPStatus

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from durable.console import timezones
from durable.errors import InvalidInput
from durable.labels import LabelledForm
from durable.permissions import signed_in


class TimeZoneForm(LabelledForm, forms.Form):
    time_zone = forms.CharField(max_length=64, label=timezones.LABEL,
                                help_text="times on every page are shown in it, e.g. Europe/Paris")
    # Set by durable/static/durable/time-zone.js when it sends the browser's zone: answered with 204, not a page.
    from_browser = forms.BooleanField(required=False, widget=forms.HiddenInput, label="Sent by the browser")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    """Every logged-in user sets their own preferences; nobody else's."""
    if request.method != "POST":
        current = timezones.operator_zone(request)
        return _page(request, TimeZoneForm(initial={"time_zone": current}))
    form = TimeZoneForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    try:
        saved = timezones.set_time_zone(user=signed_in(request.user), time_zone=form.cleaned_data["time_zone"].strip())
    except InvalidInput as exc:
        form.add_error("time_zone", exc.errors["time_zone"])
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    timezones.remember(request, saved.time_zone)
    if form.cleaned_data["from_browser"]:
        return HttpResponse(status=HTTPStatus.NO_CONTENT)
    messages.success(request, f"Times are now shown in {saved.time_zone}.")
    return redirect("durable:preferences")


def _page(request: HttpRequest, form: TimeZoneForm, status: int = HTTPStatus.OK) -> HttpResponse:
    context = {"form": form, "zones": sorted(timezones.known_zones())}
    return render(request, "durable/preferences.html", context, status=status)
