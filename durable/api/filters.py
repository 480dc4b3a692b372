"""Filters of the runs list, validated: a bad filter is a 400 naming it, not an empty page."""
from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import serializers

from durable.engine.states import RunStatus
from durable.models import Run


class RunFilterSerializer(serializers.Serializer):
    status = serializers.CharField(required=False, help_text="one status or several, comma-separated")
    workflow = serializers.CharField(required=False, max_length=100)
    version = serializers.IntegerField(required=False, min_value=1)
    business_key = serializers.CharField(required=False, max_length=200)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    finished_after = serializers.DateTimeField(required=False, help_text="ended (succeeded, failed or cancelled) "
                                               "at or after this time")

    def validate_status(self, value: str) -> list[str]:
        statuses = [s.strip().upper() for s in value.split(",") if s.strip()]
        unknown = [s for s in statuses if s not in RunStatus.__members__]
        if unknown:
            raise serializers.ValidationError(f"unknown status {', '.join(unknown)}; use one of {', '.join(RunStatus)}")
        return statuses


def filter_runs(queryset: QuerySet[Run], params: dict[str, object]) -> QuerySet[Run]:
    lookups = {
        "status": "status__in",
        "workflow": "workflow_name",
        "version": "workflow_version",
        "business_key": "business_key",
        "created_after": "created_at__gte",
        "created_before": "created_at__lt",
        "finished_after": "finished_at__gte",
    }
    return queryset.filter(**{lookups[k]: v for k, v in params.items() if k in lookups})
