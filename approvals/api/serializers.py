"""Approval requests as the API shows them, and what a decision carries."""
from __future__ import annotations

from rest_framework import serializers

from approvals.models import APPROVAL_STATUS_CHOICES, ApprovalDecision, ApprovalRequest
from durable.engine.limits import REASON_MAX_LENGTH


class DecisionSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = ApprovalDecision
        fields = ["user", "verdict", "reason", "snapshot_hash", "created_at"]


class ApprovalSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run_id", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None, allow_null=True)

    class Meta:
        model = ApprovalRequest
        fields = ["id", "run", "step", "visit", "position", "kind", "ask", "status", "workflow_name", "workflow_version",
                  "business_key",
                  "snapshot", "snapshot_hash", "approval_object", "object_hash", "approvers_required",
                  "approvals_count", "on_invalid", "on_expiry", "expires_at", "created_at", "decided_at",
                  "decided_by", "reason"]
        read_only_fields = fields


class ApprovalDetailSerializer(ApprovalSerializer):
    decisions = DecisionSerializer(many=True, read_only=True)
    last_check = serializers.JSONField(read_only=True)

    class Meta(ApprovalSerializer.Meta):
        fields = [*ApprovalSerializer.Meta.fields, "decisions", "last_check"]
        read_only_fields = fields


class ApprovalFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=APPROVAL_STATUS_CHOICES, required=False,
                                     help_text="PENDING when left out: the inbox")
    kind = serializers.CharField(max_length=100, required=False)
    workflow = serializers.CharField(max_length=100, required=False)
    version = serializers.IntegerField(min_value=1, required=False)
    business_key = serializers.CharField(max_length=200, required=False)
    run = serializers.UUIDField(required=False)


class DecideSerializer(serializers.Serializer):
    snapshot_hash = serializers.RegexField(r"^[0-9a-f]{64}$", help_text="the hash of the snapshot you looked at")
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH, required=False, allow_blank=True, default="",
                                   help_text="required to reject")


class DifferenceSerializer(serializers.Serializer):
    key = serializers.CharField()
    then = serializers.JSONField()
    now = serializers.JSONField()


class RevalidationSerializer(serializers.Serializer):
    snapshot = serializers.JSONField()
    current = serializers.JSONField()
    problems = serializers.ListField(child=serializers.CharField())
    differences = DifferenceSerializer(many=True)
    holds = serializers.BooleanField()
