"""The Django admin: every model, read-only.

Runs, the ledger, checkpoints, the journal and the audit trail change only through the
services (which fence, audit and journal every change), drill records only through a drill;
the admin is for looking.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from durable.models import (
    ApiToken,
    Checkpoint,
    DeliveryAttempt,
    DrillRecord,
    JournalEntry,
    LimitGate,
    LimitTicket,
    LimitUse,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
    OperatorAction,
    OperatorPreferences,
    PauseSwitch,
    Process,
    Run,
    RunEvent,
    RunSearch,
    Schedule,
    SecurityEvent,
    SideEffect,
    StoredValue,
    StreamChunk,
    SweepTurn,
)
from durable.permissions import can_see_contents


class ReadOnlyAdmin(admin.ModelAdmin):
    """Lists and shows; never adds, changes or deletes."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ContentsAdmin(ReadOnlyAdmin):
    """Checkpoints, the journal and the ledger: the contents rule as well as the model's own view permission."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_see_contents(request.user) and super().has_view_permission(request, obj)


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "workflow_name", "workflow_version", "business_key", "status", "current_step", "created_at")
    list_filter = ("status", "workflow_name", "workflow_version")
    search_fields = ("=id", "business_key")
    date_hierarchy = "created_at"
    show_full_result_count = False  # COUNT(*) over a million runs on every page is not worth it


@admin.register(Checkpoint)
class CheckpointAdmin(ContentsAdmin):
    list_display = ("run", "seq", "step", "next_step", "state_schema_version", "created_at")
    search_fields = ("=run__id",)
    show_full_result_count = False


@admin.register(JournalEntry)
class JournalEntryAdmin(ContentsAdmin):
    list_display = ("run", "kind", "step", "call_index", "name", "fencing_token", "created_at")
    list_filter = ("kind",)
    search_fields = ("=run__id",)
    show_full_result_count = False


@admin.register(StoredValue)
class StoredValueAdmin(ContentsAdmin):
    """Large values stored once (docs/state-storage.md): what checkpoints and results refer to by hash."""

    list_display = ("hash", "size", "written_at")
    search_fields = ("=hash",)
    show_full_result_count = False


@admin.register(SideEffect)
class SideEffectAdmin(ContentsAdmin):
    list_display = ("operation_id", "action_name", "downstream", "business_key", "status", "attempts", "updated_at")
    list_filter = ("status", "action_name", "downstream")
    search_fields = ("=operation_id", "business_key", "=run__id")


@admin.register(RunEvent)
class RunEventAdmin(ContentsAdmin):  # its payload is what an outside system said: the contents rule decides
    list_display = ("id", "run", "name", "sender", "received_at", "consumed_at")
    list_filter = ("name",)


@admin.register(RunSearch)
class RunSearchAdmin(ContentsAdmin):  # the run's searchable input fields, copied: the contents rule decides
    list_display = ("run", "business_key", "created_at")
    search_fields = ("=run__id", "business_key")
    show_full_result_count = False


@admin.register(OperatorAction)
class OperatorActionAdmin(ReadOnlyAdmin):
    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        # An operation's entry repeats its ledger resolution (evidence, reference): the contents rule decides.
        return ("reason", "detail") if obj and obj.operation_id and not can_see_contents(request.user) else ()

    list_display = ("created_at", "actor_username", "action", "run", "operation_id", "source", "status_before", "status_after")
    list_filter = ("action", "source")
    search_fields = ("actor_username", "=run__id", "=operation_id")


@admin.register(SecurityEvent)
class SecurityEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "username", "address", "source", "action", "target")
    list_filter = ("kind", "source")
    search_fields = ("username", "=address", "=target")


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """The prefix names a token; its hash and its secret are never shown (the console shows the secret once)."""

    list_display = ("prefix", "name", "user", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("=prefix", "name", "user__username")
    exclude = ("secret_hash",)


@admin.register(DrillRecord)
class DrillRecordAdmin(ReadOnlyAdmin):
    list_display = ("finished_at", "workflow_name", "workflow_version", "passed", "runs", "database", "broker")
    list_filter = ("passed", "workflow_name")


@admin.register(OperatorPreferences)
class OperatorPreferencesAdmin(ReadOnlyAdmin):  # each operator sets their own on the preferences page
    list_display = ("user", "time_zone", "updated_at")
    search_fields = ("user__username",)


@admin.register(Process)
class ProcessAdmin(ReadOnlyAdmin):
    """The web and worker processes that started against this database (durable/fleet.py)."""

    list_display = ("kind", "hostname", "pid", "started_at", "last_seen")
    list_filter = ("kind", "hostname")


@admin.register(SweepTurn)
class SweepTurnAdmin(ReadOnlyAdmin):
    """When the workers' next sweep is due and which worker took the last turn (durable.runtime.sweeper)."""

    list_display = ("scope", "due_at", "taken_by")


# Named limits (durable/runtime/limits.py): rows only the calls under a limit write; the console's Limits page
# reads them as each limit's use.
@admin.register(LimitGate)
class LimitGateAdmin(ReadOnlyAdmin):
    """One row per limit and key that every worker locks first; a 429's pause."""

    list_display = ("limit", "key", "paused_until", "touched_at")
    search_fields = ("limit", "key")


@admin.register(LimitTicket)
class LimitTicketAdmin(ReadOnlyAdmin):
    """A slot held under a lease's fencing token, a run waiting, or room granted to a woken run."""

    list_display = ("limit", "key", "run", "call", "state", "priority", "arrived_at", "granted_at")
    list_filter = ("state", "limit")
    search_fields = ("limit", "key", "run__id")


@admin.register(LimitUse)
class LimitUseAdmin(ReadOnlyAdmin):
    """Call starts and tokens in a rate's or a tokens limit's window."""

    list_display = ("limit", "key", "started_at", "tokens")
    list_filter = ("limit",)


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    """Schedules change through the API (durable/schedules.py, audited); read here."""

    list_display = ("name", "workflow", "cron", "time_zone", "paused", "next_fire_at", "last_fire_at", "last_run")
    list_filter = ("paused", "workflow", "declared_in_code")
    search_fields = ("name", "workflow")


@admin.register(PauseSwitch)
class PauseSwitchAdmin(ReadOnlyAdmin):
    """A workflow's kill switch, off while its row exists: turned off and on through the console's Paused page or
    the API (durable/pauses.py, audited)."""

    list_display = ("workflow_name", "workflow_version", "reason", "created_by", "created_at")
    search_fields = ("workflow_name",)


@admin.register(StreamChunk)
class StreamChunkAdmin(ContentsAdmin):  # what a step published: its data is the run's contents
    """What steps published with ctx.stream, kept for DURABLE_STREAM_RETENTION_SECONDS (durable/runtime/stream.py)."""

    list_display = ("id", "run", "step", "visit", "kind", "published_at")
    list_filter = ("kind",)
    search_fields = ("=run__id",)


# Notifications (durable/notifications): deliveries change only by sending; failed ones are listed here.
@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(ReadOnlyAdmin):  # each user sets their own on /notifications/
    list_display = ("user", "events", "channels", "updated_at")
    search_fields = ("user__username",)


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "fencing_token", "started_at", "finished_at", "outcome", "status_code", "error")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NotificationEvent)
class NotificationEventAdmin(ContentsAdmin):  # its detail holds evidence and errors
    list_display = ("occurred_at", "kind", "subject", "run", "fanned_out_at")
    list_filter = ("kind",)
    search_fields = ("subject", "key")


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(ReadOnlyAdmin):
    list_display = ("id", "user", "channel", "status", "attempts", "created_at", "sent_at", "last_error")
    list_filter = ("status", "channel")
    search_fields = ("id", "user__username")
    inlines = [AttemptInline]


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnlyAdmin):  # also shown under its delivery
    list_display = ("delivery", "number", "outcome", "status_code", "started_at", "finished_at")
    list_filter = ("outcome",)
    search_fields = ("=delivery__id",)
