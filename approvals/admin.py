"""Approval requests and decisions in the admin, read-only: decisions go through the console or the API."""
from django.contrib import admin

from approvals.models import ApprovalDecision, ApprovalRequest
from durable.admin import ReadOnlyAdmin


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "business_key", "workflow_name", "workflow_version", "status", "expires_at")
    list_filter = ("status", "kind", "workflow_name")
    search_fields = ("=id", "business_key", "=run__id")


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnlyAdmin):
    list_display = ("request", "user", "verdict", "created_at")
    list_filter = ("verdict",)
