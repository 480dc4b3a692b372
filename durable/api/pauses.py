"""The kill switches' endpoints: every run of a workflow, or of one version, paused and resumed at once."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from durable import pauses
from durable.api.errors import LabelledErrors, service_errors
from durable.api.permissions import ActionPermission
from durable.api.serializers import ReasonSerializer
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import PauseSwitch


class PauseSwitchSerializer(serializers.ModelSerializer):
    workflow_version = serializers.SerializerMethodField(help_text="the version it pauses; null: every version")
    created_by = serializers.SerializerMethodField(help_text="who turned it off")

    def get_created_by(self, switch: PauseSwitch) -> str:
        return switch.created_by.get_username() if switch.created_by else ""

    def get_workflow_version(self, switch: PauseSwitch) -> int | None:
        return switch.workflow_version or None

    class Meta:
        model = PauseSwitch
        fields = ["id", "workflow_name", "workflow_version", "reason", "created_by", "created_at"]
        read_only_fields = fields


class PauseWorkflowSerializer(serializers.Serializer):
    workflow = serializers.CharField(max_length=100)
    version = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                       help_text="one version; left out: every version of the workflow")
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, allow_blank=True)


class PausedWorkflowSerializer(PauseSwitchSerializer):
    runs = serializers.IntegerField(help_text="how many runs it paused at once or asked to pause")

    class Meta(PauseSwitchSerializer.Meta):
        fields = [*PauseSwitchSerializer.Meta.fields, "runs"]
        read_only_fields = fields


class SwitchPermission(ActionPermission):
    permissions = {"list": "durable.view_run", "retrieve": "durable.view_run", "create": "durable.pause_run",
                   "resume": "durable.pause_run"}


class ResumedWorkflowSerializer(serializers.Serializer):
    resumed = serializers.IntegerField(help_text="how many runs the switch had paused and are resumed now")


class PauseSwitchViewSet(LabelledErrors, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The workflows (or versions) paused now: their runs stop at their next step boundary and new starts are held.
    POST turns one off with a reason; POST .../resume/ turns it on again, resuming the runs it paused (no API route
    answers DELETE: what was done is audited, never deleted)."""

    permission_classes = [SwitchPermission]
    queryset = PauseSwitch.objects.select_related("created_by")
    serializer_class = PauseSwitchSerializer
    pagination_class = None  # one row per paused workflow version: a short list

    @extend_schema(request=PauseWorkflowSerializer, responses={201: PausedWorkflowSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = PauseWorkflowSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        with service_errors():
            switch, runs = pauses.pause_workflow(workflow=data["workflow"], version=data.get("version"),
                                                 user=request.user, source="api", reason=data["reason"])
        switch.runs = runs  # type: ignore[attr-defined]  # the answer's count, not a field of the switch
        return Response(PausedWorkflowSerializer(switch).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReasonSerializer, responses={200: ResumedWorkflowSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        switch = self.get_object()
        payload = ReasonSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        with service_errors():
            resumed = pauses.resume_workflow(switch_id=switch.id, user=request.user, source="api",
                                             reason=payload.validated_data["reason"])
        return Response({"resumed": resumed})
