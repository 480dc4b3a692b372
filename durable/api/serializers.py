"""API payloads: what clients send and what they get back."""
from __future__ import annotations

from rest_framework import serializers

from durable.models import Checkpoint, JournalEntry, Run, SideEffect


def has_nul(value: object) -> bool:
    """Whether a JSON value holds a NUL character anywhere, in a key or a string: Postgres's jsonb and
    text columns refuse it (a 500), where SQLite stores it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(item) for item in value)
    return False


# Objects and lists nested deeper than this are refused: no workflow needs more, and the checks and
# encoders that walk a value recursively (has_nul, json.dumps, pydantic) would hit Python's recursion limit.
MAX_JSON_DEPTH = 100
TOO_DEEP = f"must not nest objects and lists more than {MAX_JSON_DEPTH} levels deep"


def too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON value nests objects and lists more than `limit` levels; walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class TextJSONField(serializers.JSONField):
    """A JSONField whose strings the database can store: no NUL characters, and nested at most MAX_JSON_DEPTH."""

    def to_internal_value(self, data: object) -> object:
        try:
            value = super().to_internal_value(data)
        except RecursionError:  # a form-encoded field's JSON text, parsed here
            raise serializers.ValidationError(TOO_DEEP) from None
        if too_deep(value):
            raise serializers.ValidationError(TOO_DEEP)
        if has_nul(value):
            raise serializers.ValidationError("must not contain NUL (\\u0000) characters")
        return value


class StartRunSerializer(serializers.Serializer):
    workflow = serializers.CharField(max_length=100)
    input = TextJSONField()
    business_key = serializers.CharField(max_length=200)
    version = serializers.IntegerField(
        min_value=1, required=False,
        help_text="leave out to start the workflow's current version (the newest). Older versions only finish "
                  "the runs pinned to them: starting one needs the durable.start_older_version permission "
                  "(403 without it) and is audited with `reason`")
    reason = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="",
                                   help_text="why an older version is started (recorded in the audit trail)")
    idempotency_key = serializers.CharField(max_length=200, required=False, allow_blank=False,
                                            help_text="or the Idempotency-Key header: a retry returns the same run")

    def validate_input(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class MigrateSerializer(ReasonSerializer):
    to_version = serializers.IntegerField(min_value=1)


class MigrateBlockedSerializer(MigrateSerializer):
    workflow = serializers.CharField(max_length=100)
    from_version = serializers.IntegerField(min_value=1)


class MigrateBlockedResultSerializer(serializers.Serializer):
    migrated = serializers.ListField(child=serializers.UUIDField())
    refused = serializers.DictField(child=serializers.CharField(), help_text="run id: why it was not migrated")


class RunSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")

    class Meta:
        model = Run
        fields = [
            "id", "url", "workflow_name", "workflow_version", "checkpoint_schema_version", "tool_catalog_version",
            "prompt_release", "model_policy_version", "topology_fingerprint", "topology", "business_key", "idempotency_key",
            "status", "current_step", "checkpoint_seq", "attempt", "input", "output", "error", "lease_owner",
            "lease_expires_at", "fencing_token", "next_attempt_at", "created_at", "updated_at", "finished_at",
        ]
        read_only_fields = fields


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["seq", "step", "next_step", "state", "state_schema_version", "created_at"]


class JournalEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = JournalEntry
        fields = ["id", "kind", "step", "call_index", "name", "result", "detail", "fencing_token", "created_at"]


class SideEffectSerializer(serializers.ModelSerializer):
    class Meta:
        model = SideEffect
        fields = [
            "operation_id", "step", "action_name", "business_key", "request_hash", "status", "external_ref",
            "result_json", "attempts", "last_error", "resolved_at", "resolution_evidence", "created_at", "updated_at",
        ]


class RunDetailSerializer(RunSerializer):
    checkpoints = CheckpointSerializer(many=True, read_only=True)
    journal = JournalEntrySerializer(many=True, read_only=True)
    side_effects = SideEffectSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "checkpoints", "journal", "side_effects"]
        read_only_fields = fields
