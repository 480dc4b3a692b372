"""Approval requests: a paused run's question to a human, bound to what the human saw."""
from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from durable.engine.approvals import ApprovalStatus, Path, Verdict
from durable.models import Run

APPROVAL_STATUS_CHOICES = [(s.value, s.value.capitalize()) for s in ApprovalStatus]
PATH_CHOICES = [(p.value, p.value.replace("_", " ")) for p in Path]


class ApprovalRequest(models.Model):
    """One ask. Asking again (after an invalidation) creates a new request; the old one stays as history."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="approvals")
    step = models.CharField(max_length=100)
    visit = models.PositiveIntegerField(default=0, help_text="the visit of the step that asked: the seq of the "
                                                             "checkpoint it started from")
    position = models.PositiveSmallIntegerField(default=1, help_text="the n-th request_approval of that visit")
    kind = models.CharField(max_length=100, help_text="what is being approved, e.g. refund")
    ask = models.PositiveIntegerField(default=1, help_text="1 for the first ask at this place, 2 after asking again...")
    workflow_name = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    business_key = models.CharField(max_length=200)
    snapshot = models.JSONField(help_text="the business facts the approver sees, read when the request was made")
    snapshot_hash = models.CharField(max_length=64)
    approval_object = models.JSONField(help_text="exactly what is approved: action, amount, target")
    object_hash = models.CharField(max_length=64)
    revalidate = models.CharField(max_length=300, help_text="module:function that re-reads the preconditions")
    on_invalid = models.CharField(max_length=20, choices=PATH_CHOICES)
    on_expiry = models.CharField(max_length=20, choices=PATH_CHOICES)
    approvers_required = models.PositiveSmallIntegerField(default=1)
    approvals_count = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=20, choices=APPROVAL_STATUS_CHOICES, default=ApprovalStatus.PENDING)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+", help_text="whoever made the final decision")
    reason = models.TextField(blank=True, help_text="the rejection's reason, or why it was invalidated")
    last_check = models.JSONField(null=True, blank=True, help_text="the newest revalidation: current values, problems")
    used_at = models.DateTimeField(null=True, blank=True, help_text="when the run revalidated it and went on to act: "
                                                                   "its visit run again reuses that verdict")

    class Meta:
        ordering = ["expires_at", "id"]
        constraints = [
            # Each place a visit asks at (its n-th request_approval) waits on at most one open question.
            models.UniqueConstraint(fields=["run", "step", "visit", "position"], condition=Q(status="PENDING"),
                                    name="approval_one_pending"),
            models.UniqueConstraint(fields=["run", "step", "visit", "position", "ask"], name="approval_run_step_ask"),
        ]
        indexes = [
            # The inbox and the sweeper: pending requests by expiry.
            models.Index(fields=["expires_at", "id"], name="approval_pending_expiry", condition=Q(status="PENDING")),
            models.Index(fields=["status", "-created_at"], name="approval_status_created"),
            models.Index(fields=["business_key"], name="approval_business_key"),
            # The overview's decisions of the last 24 hours and their waits.
            models.Index(fields=["decided_at"], name="approval_decided", condition=Q(decided_at__isnull=False)),
        ]
        permissions = [("decide_approvalrequest", "Can approve or reject approval requests")]

    def __str__(self) -> str:
        return f"{self.kind} for {self.business_key} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == ApprovalStatus.PENDING

    @property
    def waited(self) -> timedelta | None:
        """How long the request has waited for a decision (still open), or waited until it was closed."""
        if self.is_open:
            return timezone.now() - self.created_at
        return self.decided_at - self.created_at if self.decided_at else None

    @property
    def notice(self) -> dict[str, object]:
        """What a notification of this request says (durable.signals.operator_event's detail)."""
        return {"approval": self.kind, "business_key": self.business_key, "workflow": self.workflow_name,
                "expires_at": self.expires_at.isoformat(), "approvers_required": self.approvers_required}


class ApprovalDecision(models.Model):
    """One person's approve or reject on one request; append-only."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT, related_name="decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=10, choices=[(v.value, v.value) for v in Verdict])
    reason = models.TextField(blank=True)
    snapshot_hash = models.CharField(max_length=64, help_text="the snapshot the decider saw")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["request", "user"], name="approval_one_decision_per_user")]

    def __str__(self) -> str:
        return f"{self.user} {self.verdict} {self.request_id}"
