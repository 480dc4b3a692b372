"""`POST /api/runs/bulk/`: cancel or retry many runs with one reason, chosen by id or by the runs list's filters."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

from durable import bulk
from durable.api.errors import service_errors
from durable.api.filters import RunFilterSerializer, filter_runs
from durable.api.permissions import ACTION_PERMISSIONS
from durable.conf import durable_settings
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import Run

CHOOSE = "choose the runs with either run_ids (a list of run ids) or filter (the filters of GET /api/runs/), not both"


class BulkFilterSerializer(RunFilterSerializer):
    """GET /api/runs/'s filters; a name it does not know is refused, never ignored into "every run"."""

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: [f"not a filter; use {', '.join(self.fields)}"]
                                               for name in unknown})
        return super().to_internal_value(data)


class BulkSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=sorted(bulk.BULK_ACTIONS))
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, help_text="why; recorded on each run's audit row")
    run_ids = serializers.ListField(child=serializers.UUIDField(), required=False, allow_empty=False)
    filter = BulkFilterSerializer(required=False)
    dry_run = serializers.BooleanField(default=False, help_text="answer what would happen, and write nothing")

    def validate_run_ids(self, value: list[Any]) -> list[Any]:
        limit = durable_settings.DURABLE_BULK_LIMIT
        if len(value) > limit:
            raise serializers.ValidationError(str(bulk.too_many("run_ids", f"{len(value)} runs were chosen",
                                                                limit).errors["run_ids"][0]))
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("run_ids" in attrs) == ("filter" in attrs):
            raise serializers.ValidationError({"run_ids": [CHOOSE], "filter": [CHOOSE]})
        return attrs


class BulkRunOutcomeSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    business_key = serializers.CharField()
    status = serializers.CharField(help_text="as found (dry run), or as the action left the run")
    outcome = serializers.CharField(help_text="would_cancel/would_retry (dry run), cancelled/retried, "
                                              "not_applicable, skipped (changed meanwhile), not_found")
    detail = serializers.CharField()
    cancellation = serializers.DictField(required=False, help_text="what the cancel found, as POST .../cancel/")


class BulkSideEffectSerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    action = serializers.CharField()
    operation_id = serializers.CharField()
    status = serializers.CharField()
    external_ref = serializers.CharField()


class BulkResultSerializer(serializers.Serializer):
    action = serializers.CharField()
    dry_run = serializers.BooleanField()
    bulk_id = serializers.CharField(allow_null=True, help_text="links the runs' audit rows; null on a dry run")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="runs per outcome")
    run_ids = serializers.DictField(child=serializers.ListField(child=serializers.UUIDField()),
                                    help_text="run ids per outcome")
    runs = BulkRunOutcomeSerializer(many=True)
    already_happened = BulkSideEffectSerializer(many=True, help_text="cancel: side effects done, not undone")
    may_have_happened = BulkSideEffectSerializer(many=True, help_text="cancel: side effects possibly in flight")


def bulk_answer(request: Request) -> dict[str, Any]:
    """Check the single-run action's permission first (403), then the body (400 naming the field), then act."""
    asked = request.data.get("action") if isinstance(request.data, dict) else None
    if isinstance(asked, str) and asked in bulk.BULK_ACTIONS:
        needed = ACTION_PERMISSIONS[asked]
        if not request.user.has_perm(needed):
            raise PermissionDenied(f"you may not {asked} runs: that needs the {needed} permission")
    payload = BulkSerializer(data=request.data)
    payload.is_valid(raise_exception=True)
    data = payload.validated_data
    if "run_ids" in data:
        selection = bulk.Selection.by_ids(data["run_ids"])
    else:
        selection = bulk.Selection.by_filter(filter_runs(Run.objects.all(), data["filter"]))
    with service_errors():
        if data["dry_run"]:
            return bulk.plan(action=data["action"], selection=selection).as_json()
        return bulk.perform(action=data["action"], selection=selection, user=request.user, source="api",
                            reason=data["reason"]).as_json()
