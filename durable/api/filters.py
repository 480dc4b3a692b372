"""Filters of the runs list, validated: a bad filter is a 400 naming it, not an empty page."""
from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import serializers

from durable.engine.states import RunStatus
from durable.engine.waits import WaitKind
from durable.models import Run

WAIT_KINDS = [kind.value for kind in WaitKind]  # what a WAITING run waits for: timer, event, child


class RunFilterSerializer(serializers.Serializer):
    status = serializers.CharField(required=False, help_text="one status or several, comma-separated")
    workflow = serializers.CharField(required=False, max_length=100)
    version = serializers.IntegerField(required=False, min_value=1)
    business_key = serializers.CharField(required=False, max_length=200)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    finished_after = serializers.DateTimeField(required=False, help_text="ended (succeeded, failed or cancelled) "
                                               "at or after this time")
    waiting_for = serializers.ChoiceField(choices=WAIT_KINDS, required=False,
                                          help_text="WAITING runs waiting for a timer, an event or child runs")
    parent_run = serializers.UUIDField(required=False, help_text="the child runs of this run")

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
        "parent_run": "parent_run_id",
    }
    queryset = queryset.filter(**{lookups[k]: v for k, v in params.items() if k in lookups})
    if "waiting_for" in params:  # the record of a wait may linger after the run left WAITING: both must hold
        queryset = queryset.filter(status=RunStatus.WAITING, waiting_for__kind=params["waiting_for"])
    return queryset
