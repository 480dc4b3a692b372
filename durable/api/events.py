"""Events from outside, through the API: sent to a run by its id or by what a webhook knows (the workflow and the
business key), each through durable.events.send_event, the one place for the rule; and a run's mailbox, read."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from durable.api.errors import LabelledErrors, service_errors
from durable.api.idempotency import HEADER, idempotency_key
from durable.api.pagination import CursorPages
from durable.api.permissions import ActionPermission
from durable.api.schema import NOT_FOUND, ConflictSerializer
from durable.api.serializers import TextJSONField
from durable.events import SEND_EVENT, Delivery, send_event
from durable.models import JournalEntry, Run, RunEvent

EXISTING_EVENT_HEADER, IDEMPOTENCY_KEY = "Durable-Existing-Event", "idempotency-key"
SEND_DESCRIPTION = f"""Put an event in the run's mailbox, in arrival order; a run waiting for its name
(`ctx.wait_for_event`) is woken, a run not waiting for it yet keeps it until a wait takes it. Answers 201 with
the event; sent again with the same Idempotency-Key, 200 with the same event and the header
`{EXISTING_EVENT_HEADER}: {IDEMPOTENCY_KEY}` (nothing new is kept: a webhook retried five times is one event).
The payload is any storable JSON up to DURABLE_EVENT_MAX_BYTES, checked against the pydantic model the run's
workflow declares for the name, if it does (400 naming `payload.<field>`). 409 when the run has ended
(`current_status`), or when the Idempotency-Key was sent before with another name or payload."""


class SendEventSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, trim_whitespace=False,  # matched exactly: " reply" is refused
                                 help_text="the name the run waits for (ctx.wait_for_event): letters, digits, '_', "
                                           "'.', ':' or '-', matched exactly; one the run's workflow declares, if it "
                                           "declares its events")
    payload = TextJSONField(required=False, allow_null=True, default=None,
                            help_text="any JSON; the workflow may declare a model for the name")
    idempotency_key = serializers.CharField(max_length=200, required=False, allow_blank=False,
                                            help_text="or the Idempotency-Key header: the same key again is the "
                                                      "same event")


class SendEventByKeySerializer(SendEventSerializer):
    workflow = serializers.CharField(max_length=100, help_text="the workflow of the run the event is for")
    business_key = serializers.CharField(max_length=200, help_text="the business key of that workflow's active run")


class EventDeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the event's place in the run's mailbox (arrival order)")
    run_id = serializers.UUIDField()
    name = serializers.CharField()
    sender = serializers.CharField(help_text="who sent it: api:<username>")
    received_at = serializers.DateTimeField()
    woke_run = serializers.BooleanField(help_text="the run was waiting for this name and was woken by it (on a "
                                                  "replay: what the first delivery did)")
    consumed_at = serializers.DateTimeField(allow_null=True, help_text="when a wait of the run took it; null "
                                                                       "while it is in the mailbox")


class EventConflictSerializer(ConflictSerializer):
    runs = serializers.ListField(child=serializers.UUIDField(), required=False,
                                 help_text="the business key's active runs, when it has several: send to one by id")
    run_id = serializers.UUIDField(required=False, help_text="the business key's run, when it has ended")
    event_id = serializers.IntegerField(required=False, help_text="the event the Idempotency-Key was first sent as")


class RunEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["id", "name", "sender", "idempotency_key", "received_at", "consumed_at", "consumed_step",
                  "consumed_visit"]
        read_only_fields = fields


class RunEventContentsSerializer(RunEventSerializer):
    """With the payload: a run's contents, shown under the contents rule (durable.permissions.can_see_contents)."""

    class Meta(RunEventSerializer.Meta):
        fields = [*RunEventSerializer.Meta.fields, "payload"]
        read_only_fields = fields


class MailboxPagination(CursorPages):
    ordering = ("id",)  # arrival order


SEND_RESPONSES = {
    201: OpenApiResponse(EventDeliverySerializer, description="The event is in the run's mailbox"),
    200: OpenApiResponse(EventDeliverySerializer, description="Sent before with this Idempotency-Key: the same "
                         "event, nothing new kept"),
    409: OpenApiResponse(EventConflictSerializer, description="The run has ended, the business key has several "
                         "active runs, or the Idempotency-Key was sent with another name or payload"),
}
SEND_PARAMETERS = [HEADER, OpenApiParameter(EXISTING_EVENT_HEADER, str, OpenApiParameter.HEADER, response=[200],
                                            enum=[IDEMPOTENCY_KEY], description="a replay of an Idempotency-Key")]


def deliver(request: Request, payload: SendEventSerializer, **target: Any) -> Response:
    """Send the validated event to `target` (run_id=..., or workflow=... and business_key=...) as the request's
    user; 201 with the event, or 200 with the one its Idempotency-Key was first sent as."""
    data = payload.validated_data
    key = idempotency_key(request, data)
    with service_errors():
        try:
            delivery = send_event(name=data["name"], payload=data["payload"], idempotency_key=key,
                                  user=request.user, source="api", **target)
        except Run.DoesNotExist as missing:
            raise NotFound(str(missing) or "No such run.") from None
    body = EventDeliverySerializer(delivery_answer(delivery)).data
    if delivery.created:
        return Response(body, status=status.HTTP_201_CREATED)
    return Response(body, status=status.HTTP_200_OK, headers={EXISTING_EVENT_HEADER: IDEMPOTENCY_KEY})


def delivery_answer(delivery: Delivery) -> dict[str, Any]:
    event = delivery.event
    return {"id": event.id, "run_id": event.run_id, "name": event.name, "sender": event.sender,
            "received_at": event.received_at, "woke_run": _woke(delivery), "consumed_at": event.consumed_at}


def _woke(delivery: Delivery) -> bool:
    """Whether the event woke its run when it was first delivered: a replay answers as the first delivery did,
    from the run's timeline (false once retention has pruned the journal of an ended run)."""
    if delivery.created:
        return delivery.woke
    details = JournalEntry.objects.filter(run_id=delivery.event.run_id, kind=JournalEntry.Kind.EVENT_RECEIVED,
                                          detail__event=delivery.event.id).values_list("detail", flat=True)
    return any(isinstance(detail, dict) and detail.get("woke_run") is True for detail in details)


class EventPermission(ActionPermission):
    permissions = {"create": SEND_EVENT}


class EventViewSet(LabelledErrors, viewsets.GenericViewSet):
    """`POST /api/events/`: an event for the active run of a workflow's business key, as a webhook knows it."""

    permission_classes = [EventPermission]
    serializer_class = SendEventByKeySerializer
    queryset = RunEvent.objects.none()  # nothing is listed here; a run's mailbox is GET /api/runs/{id}/events/

    @extend_schema(request=SendEventByKeySerializer, responses={**SEND_RESPONSES, 404: NOT_FOUND},
                   parameters=SEND_PARAMETERS,
                   description=f"""Send an event to the active run of `workflow` for `business_key`: what a webhook
receiver knows. 404 when the key has no run of the workflow; 409 naming the runs (`runs`) when the workflow allows
several active runs per key and the key has more than one (send to one of them by id,
`POST /api/runs/{{id}}/events/`), or naming the status (`current_status`, `run_id`) when its run has ended.

{SEND_DESCRIPTION}""")
    def create(self, request: Request) -> Response:
        payload = SendEventByKeySerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return deliver(request, payload, workflow=payload.validated_data["workflow"],
                       business_key=payload.validated_data["business_key"])
