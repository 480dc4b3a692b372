"""API payloads: what clients send and what they get back."""
from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from durable import budgets
from durable.api.filters import WAIT_KINDS
from durable.engine.call_limits import PRIORITY_MAX, PRIORITY_MIN
from durable.engine.costs import COST_DECIMALS, COST_DIGITS, MAX_TOKENS, decimal_text
from durable.engine.json_values import UnstorableJSON, check_storable, parse_json
from durable.engine.limits import REASON_MAX_LENGTH
from durable.engine.states import RunStatus
from durable.engine.waits import WaitingFor
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.store.checkpoints import fill_states
from durable.store.values import fill_results


class TextJSONField(serializers.JSONField):
    """A JSONField whose value the database can store (durable.engine.json_values): nested at most
    MAX_JSON_DEPTH, with no NaN or Infinity, no NUL character and no lone surrogate."""

    def to_internal_value(self, data: Any) -> Any:  # anything a client sent; a JSON value back
        try:
            if self.binary or getattr(data, "is_json_string", False):  # a form-encoded field's JSON text
                return parse_json(data.decode() if isinstance(data, bytes) else str(data))
            check_storable(data)  # first: DRF's own check below encodes the value recursively
        except UnstorableJSON as exc:
            raise serializers.ValidationError(str(exc)) from None
        return super().to_internal_value(data)


class StartRunSerializer(serializers.Serializer):
    workflow = serializers.CharField(max_length=100)
    input = TextJSONField()
    business_key = serializers.CharField(max_length=200)
    version = serializers.IntegerField(
        min_value=1, required=False,
        help_text="leave out to start the workflow's current version (the newest). Older versions only finish "
                  "the runs pinned to them: starting one needs the durable.start_older_version permission "
                  "(403 without it) and is audited with `reason`")
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, required=False, allow_blank=True, default="",
                                   help_text="why an older version is started (recorded in the audit trail)")
    idempotency_key = serializers.CharField(max_length=200, required=False, allow_blank=False,
                                            help_text="or the Idempotency-Key header: a retry returns the same run")
    priority = serializers.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, required=False, default=0,
                                        help_text="higher goes first among runs waiting for a named limit's room")

    def validate_priority(self, value: object) -> object:
        if isinstance(self.initial_data, dict) and not isinstance(self.initial_data.get("priority", 0), int):
            raise serializers.ValidationError("must be a whole number (a JSON integer), not "
                                              f"{self.initial_data.get('priority')!r}")
        return value

    def validate_input(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, required=False, allow_blank=True, default="")


class MoneyField(serializers.DecimalField):
    """An amount in the price table's currency, as a decimal string as short as it is exact ("0.000027")."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, **kwargs)

    def to_representation(self, value: Any) -> str:
        return decimal_text(Decimal(value))  # a null is answered null before this is asked


class RaiseBudgetSerializer(ReasonSerializer):
    tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False,
                                      help_text="the run's new LLM-token budget (input and output LLM tokens together)")
    cost = MoneyField(min_value=0, required=False, help_text="the run's new cost budget, in the currency of "
                                                             "DURABLE_LLM_PRICES, as a decimal string")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tokens") is None and attrs.get("cost") is None:
            raise serializers.ValidationError(
                {"tokens": ["give the new LLM-token budget, the new cost budget, or both"]})
        return attrs


class MigrateSerializer(ReasonSerializer):
    to_version = serializers.IntegerField(min_value=1)


class ForkSerializer(serializers.Serializer):
    checkpoint = serializers.IntegerField(min_value=0, max_value=2**31 - 1, help_text="the seq of the run's checkpoint to fork from")
    version = serializers.IntegerField(min_value=1, required=False, help_text="a newer version that takes over from "
                                       "that checkpoint (its topology, or a migration); by default the run's")
    state = TextJSONField(required=False, help_text="the fork's state (an object) instead of the checkpoint's, "
                          "validated by the workflow's state model; what it changes is audited")
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, help_text="why: audited with the fork")

    def validate_state(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("the state is a JSON object, as the state model reads it")
        return value


class MigrateBlockedSerializer(MigrateSerializer):
    workflow = serializers.CharField(max_length=100)
    from_version = serializers.IntegerField(min_value=1)


class MigrateBlockedResultSerializer(serializers.Serializer):
    migrated = serializers.ListField(child=serializers.UUIDField())
    refused = serializers.DictField(child=serializers.CharField(), help_text="run id: why it was not migrated")


class WaitingForSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=WAIT_KINDS)
    step = serializers.CharField(help_text="the step whose visit waits")
    visit = serializers.IntegerField(help_text="the visit (the seq of the checkpoint it started from)")
    until = serializers.DateTimeField(allow_null=True, help_text="the timer's due time, or the event wait's "
                                      "deadline; null: no deadline")
    seconds_left = serializers.FloatField(allow_null=True, help_text="until `until` (0 once it has passed and the "
                                          "sweeper has yet to wake the run); null: no deadline")
    events = serializers.ListField(child=serializers.CharField(), help_text="the event names, any of which wakes it")
    children = serializers.ListField(child=serializers.UUIDField(), help_text="the child runs, all of which must end")
    summary = serializers.CharField(help_text="all of it in one line, as the console shows it")


def waiting_for(run: Run) -> dict[str, Any] | None:
    """What a WAITING run waits for, with the time left by this server's clock; None for any other status (the
    run's record of its last wait may linger after it)."""
    if run.status != RunStatus.WAITING or not isinstance(run.waiting_for, dict):
        return None
    wait = WaitingFor.from_json(run.waiting_for)
    left = None if wait.until is None else round(max(0.0, (wait.until - timezone.now()).total_seconds()), 3)
    return {"kind": wait.kind.value, "step": wait.step, "visit": wait.visit, "until": wait.until,
            "seconds_left": left, "events": list(wait.events), "children": list(wait.children),
            "summary": wait.describe()}


class RunSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail", help_text="this run in the API")
    cost = MoneyField(read_only=True, help_text="what its priced model calls cost, in the currency of "
                                                "DURABLE_LLM_PRICES; see unpriced_tokens for the others")
    unpriced_tokens = serializers.IntegerField(read_only=True, help_text="tokens of model calls whose model has "
                                               "no price: their cost is unknown, and not in `cost`")
    budget_cost = MoneyField(read_only=True, allow_null=True, help_text="its cost budget; null: no limit")
    console_url = serializers.HyperlinkedIdentityField(
        view_name="durable:run-detail", lookup_url_kwarg="run_id",
        help_text="this run's page in the operator console, wherever the console is mounted")
    waiting_for = serializers.SerializerMethodField(
        help_text="while the run is WAITING: the timer, the event names or the child runs it waits for; else null")
    children = serializers.SerializerMethodField(
        help_text="the runs list of the child runs this run's steps started (ctx.start_child)")
    forks = serializers.SerializerMethodField(
        help_text="the runs list of the runs forked from this one (POST /api/runs/{id}/fork/)")

    @extend_schema_field(WaitingForSerializer(allow_null=True))
    def get_waiting_for(self, run: Run) -> dict[str, Any] | None:
        found = waiting_for(run)
        return None if found is None else WaitingForSerializer(found).data

    @extend_schema_field(OpenApiTypes.URI)
    def get_children(self, run: Run) -> str:
        # A link, not a list: the runs list stays one query whatever the number of children.
        return self._runs_list({"parent_run": run.id})

    @extend_schema_field(OpenApiTypes.URI)
    def get_forks(self, run: Run) -> str:
        return self._runs_list({"forked_from": run.id})

    def _runs_list(self, query: dict[str, Any]) -> str:
        url = f"{reverse('api:run-list')}?{urlencode(query)}"
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url

    class Meta:
        model = Run
        fields = [
            "id", "url", "console_url", "workflow_name", "workflow_version", "checkpoint_schema_version", "tool_catalog_version",
            "prompt_release", "model_policy_version", "topology_fingerprint", "topology", "business_key", "idempotency_key",
            "status", "current_step", "checkpoint_seq", "attempt", "input", "output", "error", "lease_owner",
            "lease_expires_at", "fencing_token", "next_attempt_at", "created_at", "updated_at", "finished_at",
            "waiting_for", "parent_run", "children",
            "input_tokens", "output_tokens", "cost", "unpriced_tokens", "budget_tokens", "budget_cost", "priority",
            "pause_requested_at", "pause_reason", "paused_by_switch",
            "forked_from", "forked_at_seq", "family_root", "forks",
        ]
        read_only_fields = fields


class SideEffectDoneSerializer(serializers.Serializer):
    action = serializers.CharField()
    operation_id = serializers.CharField(help_text="the ledger's key and the downstream's Idempotency-Key")
    status = serializers.CharField()
    external_ref = serializers.CharField(help_text="the downstream's own id for it, when it said")


class CancellationSerializer(serializers.Serializer):
    already_happened = SideEffectDoneSerializer(
        many=True, help_text="SUCCEEDED side effects: done downstream before the cancel, and not undone by it")
    may_have_happened = SideEffectDoneSerializer(
        many=True, help_text="STARTED or UNKNOWN side effects: a call in flight may still complete; the ledger "
                             "(GET /api/operations/) will say")
    stopped = serializers.ListField(child=serializers.CharField(),
                                    help_text="what the cancel stopped: the step, open approval requests")
    summary = serializers.CharField(help_text="all of it in one sentence, as the console shows it")


class CancelledRunSerializer(RunSerializer):
    cancellation = CancellationSerializer(read_only=True, help_text="what had happened, and what the cancel stopped")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "cancellation"]
        read_only_fields = fields


class CheckpointListSerializer(serializers.ListSerializer):
    """A run's checkpoints, each with its whole state: a difference's row holds what changed, so the states are
    read together, each row once (durable.store.checkpoints)."""

    def to_representation(self, data: Any) -> list[Any]:
        checkpoints = list(data.all() if hasattr(data, "all") else data)
        fill_states(checkpoints)
        return super().to_representation(checkpoints)


class CheckpointSerializer(serializers.ModelSerializer):
    state = serializers.JSONField(read_only=True, help_text="the state the step returned, whole")

    class Meta:
        list_serializer_class = CheckpointListSerializer
        model = Checkpoint
        fields = ["seq", "step", "next_step", "state", "state_schema_version", "created_at"]

    def to_representation(self, instance: Checkpoint) -> dict[str, Any]:
        fill_states([instance])  # a no-op when the list read them all
        return dict(super().to_representation(instance))


class JournalEntryListSerializer(serializers.ListSerializer):
    """A run's journal, each result whole: large values stored apart are read back together (durable.store.values)."""

    def to_representation(self, data: Any) -> list[Any]:
        entries = list(data.all() if hasattr(data, "all") else data)
        fill_results(entries)
        return super().to_representation(entries)


class JournalEntrySerializer(serializers.ModelSerializer):
    class Meta:
        list_serializer_class = JournalEntryListSerializer
        model = JournalEntry
        # `visit`: the seq of the checkpoint the step's execution started from (null: recorded before visits).
        fields = ["id", "kind", "step", "visit", "call_index", "name", "result", "detail", "fencing_token",
                  "created_at"]

    def to_representation(self, instance: JournalEntry) -> dict[str, Any]:
        fill_results([instance])  # a no-op when the list read them all
        return dict(super().to_representation(instance))


class SideEffectSerializer(serializers.ModelSerializer):
    class Meta:
        model = SideEffect
        fields = [
            "operation_id", "step", "visit", "action_name", "business_key", "request_hash", "status", "external_ref",
            "result_json", "attempts", "last_error", "resolved_at", "resolution_evidence", "created_at", "updated_at",
        ]


class VisitSpendingSerializer(serializers.Serializer):
    step = serializers.CharField()
    visit = serializers.IntegerField(allow_null=True, help_text="the seq of the checkpoint the visit started from")
    visit_number = serializers.IntegerField(allow_null=True, help_text="which visit of its step, from 1")
    model_calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    tokens = serializers.IntegerField()
    cost = serializers.CharField(help_text="of its priced model calls")
    unpriced_tokens = serializers.IntegerField()


class DelegatedSpendingSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    tokens = serializers.IntegerField()
    cost = serializers.CharField(help_text="of the priced model calls of the run and its descendants")
    unpriced_tokens = serializers.IntegerField()
    runs = serializers.IntegerField(help_text="the child runs (and theirs) counted with the run")


class RunDetailSerializer(RunSerializer):
    checkpoints = CheckpointSerializer(many=True, read_only=True)
    journal = JournalEntrySerializer(many=True, read_only=True)
    side_effects = SideEffectSerializer(many=True, read_only=True)
    spending_by_visit = serializers.SerializerMethodField(help_text="what each step visit's model calls used")
    spending_with_children = serializers.SerializerMethodField(
        help_text="what the run and the child runs it delegated to (and theirs) used together; null: no child run")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "checkpoints", "journal", "side_effects", "spending_by_visit",
                  "spending_with_children"]
        read_only_fields = fields

    @extend_schema_field(DelegatedSpendingSerializer(allow_null=True))
    def get_spending_with_children(self, run: Run) -> dict[str, Any] | None:
        delegated = budgets.with_children(run)
        return None if delegated is None else {**delegated.spent.as_json(), "runs": delegated.runs}

    @extend_schema_field(VisitSpendingSerializer(many=True))
    def get_spending_by_visit(self, run: Run) -> list[dict[str, Any]]:
        return [visit.as_json() for visit in budgets.by_visit(run)]
