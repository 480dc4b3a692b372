"""Schedules through the API: list, read, create, edit (pause and resume too), delete; each through
durable/schedules.py."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from durable import schedules
from durable.api.errors import LabelledErrors, service_errors
from durable.api.pagination import CursorPages
from durable.api.permissions import ActionPermission
from durable.api.serializers import TextJSONField
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import Schedule

VIEW_SCHEDULE = "durable.view_schedule"


class ScheduleSerializer(serializers.ModelSerializer):
    class Meta:
        model = Schedule
        fields = ["id", "name", "workflow", "cron", "time_zone", "input", "business_key_template", "overlap",
                  "catch_up", "catch_up_window", "paused", "declared_in_code", "next_fire_at", "last_fire_at",
                  "last_run", "last_outcome", "created_at", "updated_at"]
        read_only_fields = fields


class EditScheduleSerializer(serializers.Serializer):
    """What an edit may change; every field optional. The service checks them together (400 naming the field)."""

    workflow = serializers.CharField(max_length=200, required=False)
    cron = serializers.CharField(max_length=200, required=False,
                                 help_text="five fields: minute hour day-of-month month day-of-week")
    time_zone = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                      help_text="an IANA name: Europe/Paris, UTC")
    input = TextJSONField(required=False, help_text="the runs' input, checked against the workflow's input model")
    business_key_template = serializers.CharField(max_length=200, required=False,
                                                  help_text="with {schedule} and {fire_time:%Y-%m-%d}")
    overlap = serializers.ChoiceField(Schedule.Overlap.choices, required=False)  # the model's: one enum in the schema
    catch_up = serializers.ChoiceField(Schedule.CatchUp.choices, required=False)
    catch_up_window = serializers.IntegerField(required=False, help_text="seconds: how far back `all` catches up")
    paused = serializers.BooleanField(required=False)


class CreateScheduleSerializer(EditScheduleSerializer):
    name = serializers.CharField(max_length=100, help_text="unique: letters, digits, '-', '_' or '.'")
    workflow = serializers.CharField(max_length=200)
    cron = serializers.CharField(max_length=200, help_text="five fields: minute hour day-of-month month day-of-week")


class DeleteScheduleSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, required=False, default="", allow_blank=True,
                                   help_text="why, kept in the audit trail")


class SchedulePermission(ActionPermission):
    permissions = {"list": VIEW_SCHEDULE, "retrieve": VIEW_SCHEDULE, "create": schedules.MANAGE_SCHEDULE,
                   "edit": schedules.MANAGE_SCHEDULE, "delete": schedules.MANAGE_SCHEDULE}


class SchedulePages(CursorPages):
    ordering = ("created_at", "id")  # a position the column's own parsing checks (a name could hold a NUL)


class ScheduleViewSet(LabelledErrors, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """`/api/schedules/`: each with its next fire time and its last run."""

    permission_classes = [SchedulePermission]
    pagination_class = SchedulePages
    serializer_class = ScheduleSerializer
    queryset = Schedule.objects.all()
    http_method_names = ["get", "post", "head", "options"]  # every change a POST to a service, as for runs
    lookup_value_regex = "[0-9a-fA-F-]{36}"  # a schedule's id: anything else is a 404 from the URL itself

    @extend_schema(request=CreateScheduleSerializer, responses={201: ScheduleSerializer})
    def create(self, request: Request) -> Response:
        """A new schedule; 400 naming the field (an invalid cron expression or time zone), nothing written."""
        given = CreateScheduleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        with service_errors():
            schedule = schedules.create(user=request.user, **given.validated_data)
        return Response(ScheduleSerializer(schedule).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=EditScheduleSerializer, responses={200: ScheduleSerializer})
    @action(detail=True, methods=["post"])
    def edit(self, request: Request, pk: Any = None) -> Response:
        """Change what the body names: `{"paused": true}` pauses it (a resumed schedule fires from its next fire
        time after now: what passed while it was paused is not caught up). A schedule declared in code is paused
        and resumed here, and edited in its code (403). 400 naming the field, nothing written."""
        given = EditScheduleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self.get_object()  # 404 for an id that names no schedule
        with service_errors():
            schedule = schedules.edit(pk, user=request.user, **given.validated_data)
        return Response(ScheduleSerializer(schedule).data)

    @extend_schema(request=DeleteScheduleSerializer, responses={204: None})
    @action(detail=True, methods=["post"])
    def delete(self, request: Request, pk: Any = None) -> Response:
        """Delete a schedule made here, with an optional reason (audited); 403 for one declared in code: remove it
        from the code, or pause it. Its runs stay."""
        given = DeleteScheduleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self.get_object()  # 404 for an id that names no schedule
        with service_errors():
            schedules.delete(pk, user=request.user, reason=given.validated_data["reason"])
        return Response(status=status.HTTP_204_NO_CONTENT)
