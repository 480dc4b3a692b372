"""API payloads: what clients send and what they get back."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from durable.engine.json_values import UnstorableJSON, check_storable, parse_json
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import Checkpoint, JournalEntry, Run, SideEffect


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

    def validate_input(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, required=False, allow_blank=True, default="")


class MigrateSerializer(ReasonSerializer):
    to_version = serializers.IntegerField(min_value=1)


class MigrateBlockedSerializer(MigrateSerializer):
    workflow = serializers.CharField(max_length=100)
    from_version = serializers.IntegerField(min_value=1)


class MigrateBlockedResultSerializer(serializers.Serializer):
    migrated = serializers.ListField(child=serializers.UUIDField())
    refused = serializers.DictField(child=serializers.CharField(), help_text="run id: why it was not migrated")


class RunSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail", help_text="this run in the API")
    console_url = serializers.HyperlinkedIdentityField(
        view_name="durable:run-detail", lookup_url_kwarg="run_id",
        help_text="this run's page in the operator console, wherever the console is mounted")

    class Meta:
        model = Run
        fields = [
            "id", "url", "console_url", "workflow_name", "workflow_version", "checkpoint_schema_version", "tool_catalog_version",
            "prompt_release", "model_policy_version", "topology_fingerprint", "topology", "business_key", "idempotency_key",
            "status", "current_step", "checkpoint_seq", "attempt", "input", "output", "error", "lease_owner",
            "lease_expires_at", "fencing_token", "next_attempt_at", "created_at", "updated_at", "finished_at",
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


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["seq", "step", "next_step", "state", "state_schema_version", "created_at"]


class JournalEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = JournalEntry
        # `visit`: the seq of the checkpoint the step's execution started from (null: recorded before visits).
        fields = ["id", "kind", "step", "visit", "call_index", "name", "result", "detail", "fencing_token",
                  "created_at"]


class SideEffectSerializer(serializers.ModelSerializer):
    class Meta:
        model = SideEffect
        fields = [
            "operation_id", "step", "visit", "action_name", "business_key", "request_hash", "status", "external_ref",
            "result_json", "attempts", "last_error", "resolved_at", "resolution_evidence", "created_at", "updated_at",
        ]


class RunDetailSerializer(RunSerializer):
    checkpoints = CheckpointSerializer(many=True, read_only=True)
    journal = JournalEntrySerializer(many=True, read_only=True)
    side_effects = SideEffectSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "checkpoints", "journal", "side_effects"]
        read_only_fields = fields
