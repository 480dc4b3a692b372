"""Filters and orders of the runs list, validated: a bad filter is a 400 naming it, not an empty page."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import F, QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from durable.budgets import WAITING_ON_BUDGET
from durable.engine.costs import COST_DECIMALS, COST_DIGITS, MAX_TOKENS, money, whole
from durable.engine.states import RunStatus
from durable.engine.waits import WaitKind
from durable.models import Run

WAIT_KINDS = [kind.value for kind in WaitKind]  # what a WAITING run waits for: timer, event, child
# The orders the runs list offers, each as its keyset: the field a page marker holds, then the id. Newest first is
# the run_created index's order; the others are not indexed (a model call's UPDATE stays heap-only), so they sort
# the runs the filters leave: filter by time (created_after) on a large table.
ORDERS = {"newest": ("-created_at", "-id"), "cost": ("-cost", "-id"), "tokens": ("-tokens", "-id")}


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
    forked_from = serializers.UUIDField(required=False, help_text="the forks of this run (durable/forks.py)")
    cost_min = serializers.DecimalField(required=False, max_digits=COST_DIGITS, decimal_places=COST_DECIMALS,
                                        min_value=0, help_text="runs whose priced model calls cost at least this")
    tokens_min = serializers.IntegerField(required=False, min_value=0, max_value=MAX_TOKENS, help_text="runs whose model calls used at "
                                          "least this many tokens (input and output)")
    waiting_on_budget = serializers.BooleanField(required=False, help_text="true: only the runs their budget "
                                                 "stopped, waiting for an operator to raise it")
    order = serializers.ChoiceField(choices=sorted(ORDERS), required=False, help_text="newest first (the "
                                    "default), or the most expensive (cost) or the most tokens first")

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
        "forked_from": "forked_from_id",
        "cost_min": "cost__gte",
        "tokens_min": "tokens__gte",
    }
    if "tokens_min" in params or params.get("order") == "tokens":
        queryset = with_tokens(queryset)
    if params.get("waiting_on_budget"):
        queryset = queryset.filter(WAITING_ON_BUDGET)
    if "waiting_for" in params:  # the record of a wait may linger after the run left WAITING: both must hold
        queryset = queryset.filter(status=RunStatus.WAITING, waiting_for__kind=params["waiting_for"])
    return queryset.filter(**{lookups[k]: v for k, v in params.items() if k in lookups})


def with_tokens(queryset: QuerySet[Run]) -> QuerySet[Run]:
    """The runs with `tokens`, their input and output tokens together."""
    return queryset.annotate(tokens=F("input_tokens") + F("output_tokens"))


def ordering(params: dict[str, object]) -> tuple[str, str]:
    return ORDERS[str(params.get("order") or "newest")]


def position(order: str, text: str) -> Any:
    """Where a page of the list in `order` starts, read from a page marker or cursor: a time, an amount or a count
    its column holds; ValueError for anything else (a page of another list, or made up)."""
    if order == "cost":
        try:
            return money(Decimal(text), what="a page's cost")
        except InvalidOperation:
            raise ValueError(f"not an amount: {text!r}") from None
    if order == "tokens":
        return whole(int(text), what="a page's tokens")
    when = parse_datetime(text)
    if when is None:
        raise ValueError(f"not a time: {text!r}")
    return when
