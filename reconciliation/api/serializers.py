from __future__ import annotations

from rest_framework import serializers

from durable.api.serializers import SideEffectSerializer, TextJSONField
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import SideEffect
from reconciliation.services import DID_NOT_HAPPEN, FAIL, RETRY, SUCCEEDED


class OperationSerializer(SideEffectSerializer):
    run = serializers.UUIDField(source="run_id", read_only=True)
    resolved_by = serializers.CharField(source="resolved_by.username", read_only=True, default=None, allow_null=True)

    class Meta(SideEffectSerializer.Meta):
        model = SideEffect
        fields = [*SideEffectSerializer.Meta.fields, "run", "downstream", "payload", "duplicates_prevented",
                  "resolved_by"]


class ResolveSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[SUCCEEDED, DID_NOT_HAPPEN])
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, help_text="the evidence the resolution rests on")
    external_ref = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    result = TextJSONField(required=False, default=dict)
    follow_up = serializers.ChoiceField(choices=[RETRY, FAIL], required=False, allow_blank=True, default="",
                                        help_text="with did_not_happen: send again with the same key, or fail the step")

    def validate_result(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value
