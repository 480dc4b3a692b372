"""The notifications page: a user's own preferences, and what was sent to them (failed deliveries first)."""
from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Case, IntegerField, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from durable.notifications.fanout import channels_available
from durable.notifications.forms import NotificationPreferencesForm
from durable.notifications.models import Channel, NotificationDelivery, NotificationPreference
from durable.permissions import permission_required, signed_in

LISTED = 50
Status = NotificationDelivery.Status


@login_required
@permission_required("durable.view_run")
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    available = channels_available(request.user)
    saved = NotificationPreference.objects.filter(user=signed_in(request.user)).first()
    if request.method != "POST":
        initial = {"events": saved.events, "channels": saved.channels} if saved else {}
        return _page(request, NotificationPreferencesForm(initial=initial, available=available))
    form = NotificationPreferencesForm(request.POST, available=available)
    if not form.is_valid():
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    NotificationPreference.objects.update_or_create(user=request.user, defaults=form.cleaned_data)
    messages.success(request, "Your notification preferences are saved.")
    return redirect("durable:notifications")


def _page(request: HttpRequest, form: NotificationPreferencesForm, *, status: int = HTTPStatus.OK) -> HttpResponse:
    failed_first = Case(When(status=Status.FAILED, then=0), default=1, output_field=IntegerField())
    deliveries = (NotificationDelivery.objects.filter(user=signed_in(request.user)).exclude(status=Status.DIGESTED)
                  .select_related("event").order_by(failed_first, "-created_at")[:LISTED])
    context: dict[str, Any] = {"form": form, "deliveries": deliveries, "available": available_labels(form)}
    return render(request, "durable/notifications.html", context, status=status)


def available_labels(form: NotificationPreferencesForm) -> list[str]:
    return [label for value, label in Channel.choices if value in form.available]  # the form's channel choices
