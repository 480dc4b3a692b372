"""Runs, checkpoints, the journal, the side-effect ledger and the operator audit trail."""
from __future__ import annotations

import uuid
from collections.abc import Collection
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from durable.engine.costs import COST_DECIMALS, COST_DIGITS
from durable.engine.ledger import OperationStatus
from durable.engine.states import TERMINAL as ENDED
from durable.engine.states import RunStatus

RUN_STATUS_CHOICES = [(s.value, s.value.replace("_", " ").capitalize()) for s in RunStatus]


class Run(models.Model):
    """One execution of one workflow version; the database says what must run."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow_name = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    checkpoint_schema_version = models.PositiveIntegerField()
    tool_catalog_version = models.CharField(max_length=100, blank=True)
    prompt_release = models.CharField(max_length=100, blank=True)
    model_policy_version = models.CharField(max_length=100, blank=True)
    topology_fingerprint = models.CharField(max_length=64)
    topology = models.JSONField(default=list, blank=True, help_text="ordered steps and their side effects at start")
    business_key = models.CharField(max_length=200)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    start_request_hash = models.CharField(max_length=64, blank=True)
    input = models.JSONField()
    status = models.CharField(max_length=20, choices=RUN_STATUS_CHOICES, default=RunStatus.PENDING)
    current_step = models.CharField(max_length=100, blank=True)
    checkpoint_seq = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=0, help_text="failed attempts of the current step")
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fencing_token = models.PositiveBigIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="last time the sweeper sent it")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    pruned_at = models.DateTimeField(null=True, blank=True,
                                     help_text="when retention deleted its older checkpoints and its journal")
    # While WAITING: what it waits for (durable.engine.waits.WaitingFor); the due time is next_attempt_at.
    waiting_for = models.JSONField(null=True, blank=True)
    parent_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children",
                                   help_text="the run whose step started this one (ctx.start_child)")
    one_active_per_business_key = models.BooleanField(  # db_default too: the bench seeds runs with raw SQL
        default=False, db_default=False, help_text="its workflow allows one active run per business key (on_active_business_key)")
    trace_parent = models.CharField(  # durable/tracing: its trace's root, for every worker task of its life
        max_length=55, blank=True, default="", db_default="",
        help_text="the W3C traceparent of the run's root span when its start was traced (DURABLE_OTEL); else empty")
    # What its model calls used (durable/engine/costs.py): added by the fenced write that records each call, so a
    # result reused on replay is never counted again. Not indexed: a step's UPDATE stays heap-only.
    input_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    output_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cost = models.DecimalField(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, default=Decimal(0),
                               db_default=Decimal(0), help_text="of its priced model calls (DURABLE_LLM_PRICES)")
    unpriced_tokens = models.PositiveBigIntegerField(default=0, db_default=0,
                                                     help_text="of model calls whose model has no price: cost unknown")
    # Its budget: the workflow's when it started (Workflow.budget), raised by an operator; NULL: no limit.
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    budget_cost = models.DecimalField(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, null=True, blank=True)
    # Higher goes first where runs wait for a named limit's room (durable/engine/call_limits.py): -100..100.
    priority = models.SmallIntegerField(default=0, db_default=0)
    # A pause asked for (durable/runtime/pausing.py): set while it is asked and while the run is PAUSED, with its
    # reason; `paused_by_switch` when its workflow's kill switch asked it (turning the switch on resumes those only).
    pause_requested_at = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True, default="", db_default="")
    paused_by_switch = models.BooleanField(default=False, db_default=False)
    # A fork (durable/forks.py): the run and checkpoint it started from, and its family's first run, which names the
    # family's operation ids (durable.engine.ids.family_operation_id). A plain UUID, not a key: the ids never change
    # with what retention or a deletion does to the root. NULL on a run that is not a fork (its own root).
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks",
                                    help_text="the run this one was forked from (durable.forks.fork_run)")
    forked_at_seq = models.PositiveIntegerField(null=True, blank=True, help_text="the origin's checkpoint it forked")
    family_root = models.UUIDField(null=True, blank=True, help_text="the first run of its family, when a fork")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="run_status_created"),
            # The overview's newest failures and blocked runs, by when they got there.
            models.Index(fields=["status", "-updated_at"], name="run_status_updated"),
            models.Index(fields=["workflow_name", "workflow_version", "-created_at"], name="run_workflow_created"),
            models.Index(fields=["business_key"], name="run_business_key"),
            models.Index(fields=["-created_at", "-id"], name="run_created"),
            # The sweeper's questions: whose lease expired, whose retry is due.
            models.Index(fields=["lease_expires_at"], name="run_lease_expiry", condition=Q(status="RUNNING")),
            models.Index(fields=["next_attempt_at"], name="run_retry_due", condition=Q(status="WAITING_RETRY")),
            # ...and whose timer (or event deadline) is due: parked runs cost the sweeper only when due.
            models.Index(fields=["next_attempt_at"], name="run_wake_due", condition=Q(status="WAITING")),
            # Retention's question: which finished runs still have a history to prune.
            models.Index(fields=["finished_at", "id"], name="run_prunable",
                         condition=Q(status__in=["SUCCEEDED", "CANCELLED"], pruned_at__isnull=True)),
            # The overview's last 24 hours: runs that ended, by hour and how (in flight runs are not in it).
            models.Index(fields=["finished_at", "status"], name="run_finished", condition=Q(finished_at__isnull=False)),
        ]
        constraints = [
            # Two concurrent starts of the same business key cannot both create: the second one's INSERT waits
            # for the first and fails, and durable.services.start_run answers with the first (or a conflict).
            models.UniqueConstraint(fields=["workflow_name", "business_key"], name="run_one_active_per_business_key",
                                    condition=Q(one_active_per_business_key=True)
                                    & ~Q(status__in=sorted(s.value for s in ENDED))),
        ]
        permissions = [
            ("start_run", "Can start runs"),
            ("cancel_run", "Can cancel runs"),
            ("retry_run", "Can retry runs now"),
            ("resume_run", "Can resume runs"),
            ("migrate_run", "Can migrate runs to a newer workflow version"),
            # Older versions stay registered to finish the runs pinned to them; starting a new run on one (which
            # may lack a step the current version has, such as an approval) is a separate, audited permission,
            # given to no role: superusers and explicit grants only.
            ("start_older_version", "Can start a run on an older workflow version than the current one"),
            ("send_event", "Can send events to runs"),
            ("raise_budget", "Can raise the budget of a run stopped by it"),
            ("pause_run", "Can pause and resume runs, and every run of a workflow at once"),
            ("fork_run", "Can start a new run from a checkpoint of any run (a fork)"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name} v{self.workflow_version} {self.id}"

    @property
    def is_terminal(self) -> bool:
        from durable.engine.states import TERMINAL

        return RunStatus(self.status) in TERMINAL

    @property
    def current_error(self) -> Any:
        """The error, while it is why the run stands where it stands; after a retry moved it on, None."""
        from durable.engine.states import ERROR_HELD

        return self.error if RunStatus(self.status) in ERROR_HELD else None


class RunSearch(models.Model):
    """What the console's search box matches a run by, written once when the run starts (durable/console/search.py).

    A table of its own, not columns of durable_run: its trigram indexes (Postgres) are written once per run,
    never by a step's UPDATE of the run. `business_key` and `field_text` (the workflow's searchable input
    fields, `Workflow.searchable`) are lower-cased; `fields` keeps those fields as given, to say what matched.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="search")
    created_at = models.DateTimeField(help_text="the run's, so results page in the runs list's order")
    business_key = models.CharField(max_length=200, help_text="the run's, lower-cased")
    field_text = models.TextField(blank=True, help_text="one searchable field's value a line, lower-cased")
    fields = models.JSONField(default=dict, blank=True)

    class Meta:
        # The trigram indexes on business_key and field_text are Postgres-only, made by migration 0011_search.
        indexes = [models.Index(fields=["-created_at", "-run"], name="run_search_created")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.business_key}"


class Checkpoint(models.Model):
    """Append-only: where a run resumes. The newest one wins."""

    # No index of its own: checkpoint_run_seq starts with run, and every step adds a row (one index fewer to write).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    seq = models.PositiveIntegerField()
    step = models.CharField(max_length=100, help_text="the step that completed")
    next_step = models.CharField(max_length=100, blank=True, help_text="empty when the run finished")
    # A full checkpoint stores the whole state; the others store `delta`, what changed since the checkpoint
    # before, and `base`, the full one they build on. Read a checkpoint's state with durable.store.checkpoints
    # (docs/state-storage.md). Rows written before differences existed are full (base NULL).
    state = models.JSONField(null=True, blank=True, help_text="the whole state; NULL when `delta` holds it")
    delta = models.JSONField(null=True, blank=True, help_text="what changed since the checkpoint before")
    base = models.PositiveIntegerField(null=True, blank=True, help_text="the full checkpoint a difference builds on")
    state_schema_version = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="checkpoint_run_seq")]

    def __str__(self) -> str:
        return f"{self.run_id} #{self.seq} after {self.step}"


class StoredValue(models.Model):
    """A large value stored once, by its content's hash: checkpoints and recorded results refer to it by that hash
    (durable.engine.large_values, durable.store.values; docs/state-storage.md)."""

    hash = models.CharField(max_length=64, primary_key=True, help_text="SHA-256 of its canonical JSON, in hex")
    value = models.JSONField()
    size = models.PositiveBigIntegerField(help_text="its canonical JSON's length, in bytes")
    # When a writer last stored or referred to it: durable_prune deletes only values unreferenced and untouched
    # for a while, so a value a run in flight is about to refer to is never lost (durable/retention.py).
    written_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hash[:12]} ({self.size} bytes)"


class JournalEntry(models.Model):
    """Append-only history of a run: recorded activity results and everything that happened."""

    class Kind(models.TextChoices):
        ACTIVITY = "activity"
        RETRY_SCHEDULED = "retry_scheduled"
        FAILED = "failed"
        REPLAY_VIOLATION = "replay_violation"
        CONTRACT_BLOCKED = "contract_blocked"
        OPERATOR = "operator"
        SIDE_EFFECT = "side_effect"
        DUPLICATE_PREVENTED = "duplicate_prevented"
        RECONCILIATION = "reconciliation"
        NEEDS_ATTENTION = "needs_attention"
        APPROVAL = "approval"
        ACTIVITY_REUSED = "activity_reused"  # a step ran again and returned recorded results instead of calling
        PARALLEL = "parallel"  # ctx.parallel started a group of calls: which ones, under which call indexes
        WAIT = "wait"  # the run parked on a timer, events or child runs (detail: durable.engine.waits.WaitingFor)
        WAIT_ENDED = "wait_ended"  # a timer fired, an event was consumed, a deadline passed, children ended
        EVENT_RECEIVED = "event_received"  # an event arrived in the run's mailbox (who sent it)
        CHILD_STARTED = "child_started"  # ctx.start_child started (or found) a child run
        PATCH = "patch"  # ctx.patched(name) answered for a visit (detail: patched true/false), so a replay answers the same

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="journal", db_index=False)  # journal_run_step
    kind = models.CharField(max_length=30, choices=Kind.choices)
    step = models.CharField(max_length=100, blank=True)
    call_index = models.PositiveIntegerField(null=True, blank=True)
    # The visit it belongs to: the seq of the checkpoint the step's execution started from. NULL on
    # entries written before visits existed: read as the newest visit of their step (docs/workflows.md, "Visits").
    visit = models.PositiveIntegerField(null=True, blank=True)
    name = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    detail = models.JSONField(null=True, blank=True)
    fencing_token = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "created_at", "id"]
        verbose_name_plural = "journal entries"
        constraints = [
            # One recorded result per call position of a visit: a replay can never hold two answers.
            models.UniqueConstraint(
                fields=["run", "step", "visit", "call_index"], condition=Q(kind="activity", visit__isnull=False),
                name="journal_one_result_per_visit_call",
            ),
            # The same for results recorded before visits existed (one visit per step then).
            models.UniqueConstraint(
                fields=["run", "step", "call_index"], condition=Q(kind="activity", visit__isnull=True),
                name="journal_one_result_per_call",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "step", "kind"], name="journal_run_step"),
            # The overview's duplicates prevented in the last 24 hours; no other entry is in it.
            models.Index(fields=["created_at"], name="journal_duplicates", condition=Q(kind="duplicate_prevented")),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} {self.kind} {self.step} {self.name}"


OPERATION_STATUS_CHOICES = [(s.value, s.value.replace("_", " ").capitalize()) for s in OperationStatus]


class RunEvent(models.Model):
    """An event from outside in a run's mailbox (invariant 18): kept in arrival order (`id`) until a wait of the
    run consumes it, once. Sent again with the same Idempotency-Key, it is the same event."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)  # run_event_mailbox
    name = models.CharField(max_length=100)
    payload = models.JSONField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    request_hash = models.CharField(max_length=64, help_text="of name and payload: a key sent again with another is refused")
    sender = models.CharField(max_length=200, help_text="who sent it: a user, a token's user, or the code that did")
    sent_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    received_at = models.DateTimeField()
    # Set once, by the wait that took it, in the transaction that records it for that wait's visit.
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_step = models.CharField(max_length=100, blank=True)
    consumed_visit = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        indexes = [
            models.Index(fields=["run", "id"], name="run_event_mailbox"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "idempotency_key"], name="run_event_once_per_key",
                                    condition=Q(idempotency_key__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"event {self.name} #{self.id} for run {self.run_id}"


class SideEffect(models.Model):
    """The side-effect ledger: one row per external action, keyed by its operation id."""

    operation_id = models.CharField(max_length=32, primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="side_effects")
    step = models.CharField(max_length=100)
    action_name = models.CharField(max_length=100)
    downstream = models.CharField(max_length=100, blank=True, help_text="the adapter's registered name")
    business_key = models.CharField(max_length=200)
    # The visit that prepared it (the seq of the checkpoint that visit started from); NULL before visits existed.
    visit = models.PositiveIntegerField(null=True, blank=True)
    request_hash = models.CharField(max_length=64)
    payload = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=OPERATION_STATUS_CHOICES, default=OperationStatus.PENDING)
    external_ref = models.CharField(max_length=200, blank=True)
    result_json = models.JSONField(null=True, blank=True)
    response_hash = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    duplicates_prevented = models.PositiveIntegerField(default=0)
    last_error = models.JSONField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_evidence = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["status", "updated_at"], name="ledger_status_updated"),
            models.Index(fields=["business_key"], name="ledger_business_key"),
        ]
        permissions = [("resolve_sideeffect", "Can resolve UNKNOWN side effects")]

    def __str__(self) -> str:
        return f"{self.action_name} {self.operation_id} {self.status}"

    @property
    def notice(self) -> dict[str, Any]:
        """What a notification of this operation says (durable.signals.operator_event's detail)."""
        return {"action": self.action_name, "business_key": self.business_key, "downstream": self.downstream,
                "evidence": (self.last_error or {}).get("evidence", "")}

    @property
    def status_set_by_operator(self) -> bool:
        """Its status is what an operator's resolution wrote (the row has not moved since: a resolution to
        retry that the machine then sent and committed is the machine's again)."""
        return self.resolved_at is not None and self.updated_at == self.resolved_at


class AppendOnly(Exception):
    """The audit trail is append-only: no path of the application changes or removes a row."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: object) -> int:
        raise AppendOnly("audit trail rows cannot be changed")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnly("audit trail rows cannot be removed")

    def bulk_create(self, objs: Any, batch_size: int | None = None, ignore_conflicts: bool = False,
                    update_conflicts: bool = False, update_fields: Collection[str] | None = None,
                    unique_fields: Collection[str] | None = None) -> list[Any]:
        if update_conflicts:  # an upsert rewrites the rows it collides with
            raise AppendOnly("audit trail rows cannot be changed")
        return super().bulk_create(objs, batch_size=batch_size, ignore_conflicts=ignore_conflicts,
                                   update_fields=update_fields, unique_fields=unique_fields)


class OperatorAction(models.Model):
    """Append-only audit trail: who did what to which run or operation, from where."""

    objects = AppendOnlyQuerySet.as_manager()

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT)
    # The actor as they were when they acted: renaming or removing the user never rewrites history.
    actor_username = models.CharField(max_length=150, blank=True)
    actor_user_id = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=50)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="operator_actions")
    operation_id = models.CharField(max_length=32, blank=True)
    source = models.CharField(max_length=50, help_text="api, console, command")
    status_before = models.CharField(max_length=30, blank=True)
    status_after = models.CharField(max_length=30, blank=True)
    reason = models.TextField(blank=True)
    detail = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The audit trail's pages (keyset on the ordering) and its operation filter.
            models.Index(fields=["-created_at", "-id"], name="audit_created"),
            models.Index(fields=["operation_id"], name="audit_operation", condition=~Q(operation_id="")),
        ]

    def __str__(self) -> str:
        return f"{self.actor_username or 'system'} {self.action} {self.run_id or self.operation_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding or kwargs.get("force_update") or kwargs.get("update_fields"):
            raise AppendOnly("audit trail rows cannot be changed")
        # Always an INSERT: a new instance given an existing row's id would otherwise UPDATE that row.
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise AppendOnly("audit trail rows cannot be removed")


class SecurityEvent(models.Model):
    """Append-only security log: an attempt that was refused (a login, a decision, an action), by whom and why.

    Refusals change nothing, so they have no place in the audit trail of what operators did; they are
    kept here so that an attack, or a real user locked out, leaves a trace.
    """

    class Kind(models.TextChoices):
        LOGIN_FAILED = "login_failed", "Failed login"
        LOGIN_THROTTLED = "login_throttled", "Throttled login"
        FORBIDDEN = "forbidden", "Forbidden action"
        DECISION_REFUSED = "decision_refused", "Refused decision"
        TOKEN_REFUSED = "token_refused", "Refused API token"

    objects = AppendOnlyQuerySet.as_manager()

    kind = models.CharField(max_length=30, choices=Kind.choices)
    username = models.CharField(max_length=150, blank=True, help_text="as given, or the acting user's at the time")
    user_id_at_time = models.CharField(max_length=64, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    source = models.CharField(max_length=50, help_text="api, console, admin, command")
    action = models.CharField(max_length=50, blank=True, help_text="what was attempted: approve, cancel, login...")
    target = models.CharField(max_length=100, blank=True, help_text="the run, request or operation it was aimed at")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="security_created"),
                   models.Index(fields=["kind", "-created_at"], name="security_kind")]

    def __str__(self) -> str:
        return f"{self.kind} {self.username or '-'} {self.action} {self.target}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding or kwargs.get("force_update") or kwargs.get("update_fields"):
            raise AppendOnly("security log rows cannot be changed")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise AppendOnly("security log rows cannot be removed")


class ApiToken(models.Model):
    """A named API token: the prefix that identifies it and the sha256 of the whole token, never the token itself.

    The token is shown once, when it is made (durable/tokens.py); it expires, and it can be revoked.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="what it is for: the service or script that holds it")
    prefix = models.CharField(max_length=12, help_text="the token's first characters: names it, grants nothing")
    secret_hash = models.CharField(max_length=64, help_text="sha256 of the whole token, hex")
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="updated at most once a minute")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["prefix"], name="api_token_prefix"),
                   models.Index(fields=["user", "-created_at"], name="api_token_user")]
        permissions = [("manage_apitoken", "Can create and revoke anyone's API tokens")]

    def __str__(self) -> str:
        return f"{self.prefix}… {self.name} ({self.user_id})"


class DrillRecord(models.Model):
    """A fault drill that ran against one workflow version: what it covered and whether it passed.

    Written by durable/tools/drill.py when a drill ends; the launch check durable.W011 reads it.
    """

    workflow_name = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    topology_fingerprint = models.CharField(max_length=64, help_text="the drilled version's steps and side effects")
    points = models.JSONField(default=list, help_text="fault points armed")
    actions = models.JSONField(default=list, help_text="side-effect actions crashed in")
    runs = models.PositiveIntegerField(default=0)
    violations = models.JSONField(default=list, help_text="one line per cell in violation; empty when it passed")
    passed = models.BooleanField()
    database = models.CharField(max_length=30, blank=True, help_text="the database vendor it ran on")
    broker = models.CharField(max_length=30, blank=True, help_text="the broker transport it ran on")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["-finished_at"]
        indexes = [models.Index(fields=["workflow_name", "workflow_version", "-finished_at"], name="drill_version")]

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"drill of {self.workflow_name} v{self.workflow_version} {verdict} at {self.finished_at:%Y-%m-%d %H:%M}"


class OperatorPreferences(models.Model):
    """How one operator reads the console: their time zone (an IANA name, validated by durable.console.timezones)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="durable_preferences")
    time_zone = models.CharField(max_length=64, help_text="IANA time zone name, e.g. Europe/Paris")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "operator preferences"

    def __str__(self) -> str:
        return f"{self.user_id}: {self.time_zone}"


# Notifications keep their models in their own package; the app (and its migrations) is this one.
from durable.notifications.models import (  # noqa: E402,F401
    DeliveryAttempt,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
)


class Process(models.Model):
    """A web or worker process that started against this database, and the workflows it loaded.

    Written when the process starts and every PROCESS_BEAT_SECONDS after (last_seen), never per request
    or step (durable/fleet.py): it is how an error can say which processes lack a workflow and which
    to restart, and how an operator sees in the admin what is running (docs/operations.md).
    """

    class Kind(models.TextChoices):
        WEB = "web"
        WORKER = "worker"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()
    workflows = models.JSONField(default=list, help_text='the workflow versions it registered: ["name@version", ...]')
    db_connections = models.PositiveIntegerField(
        default=0, help_text="the most database connections it opens: its connection pool's size (0: no pool)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hostname", "pid"], name="process_host_pid")]
        indexes = [models.Index(fields=["-last_seen"], name="process_last_seen")]

    def __str__(self) -> str:
        return f"{self.kind} {self.hostname}:{self.pid}"


class SweepTurn(models.Model):
    """The row the workers' sweeper threads take turns on: whoever moves `due_at` past now sweeps.

    A conditional UPDATE of one row, so one sweep starts per DURABLE_SWEEP_SECONDS across every
    worker, on SQLite as on Postgres (durable.runtime.sweeper.take_turn). One row per sweeper
    scope: production's, and one per tool run scoped to its own runs (durable/scope.py), so a
    benchmark's workers never take production's turn.
    """

    scope = models.CharField(max_length=40, primary_key=True)
    due_at = models.DateTimeField()
    taken_by = models.CharField(max_length=255, blank=True)

    def __str__(self) -> str:
        return f"next sweep due at {self.due_at:%H:%M:%S} (last taken by {self.taken_by or 'nobody'})"


class LimitGate(models.Model):
    """One named limit for one key (durable/engine/call_limits.py): the row every worker takes first, so that two
    workers never both count room and both take it; and the limit's pause after a provider asked it to wait."""

    limit = models.CharField(max_length=100)
    key = models.CharField(max_length=200, blank=True, default="")
    # A provider answered 429 with Retry-After on a call under this limit: no call of it starts before this time
    # (kept on the limit's row for key "", read by every key).
    paused_until = models.DateTimeField(null=True, blank=True)
    touched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["limit", "key"], name="limit_gate_one_per_key")]


class LimitTicket(models.Model):
    """A run's call under a named limit: HELD while it is in flight (a concurrency slot, tied to the lease that took
    it: a run re-claimed or ended frees it), WAITING while its run is parked for room, GRANTED once a call giving
    room back woke it (the room is kept for it until it takes it, or a grace period passes)."""

    class State(models.TextChoices):
        HELD = "HELD"
        WAITING = "WAITING"
        GRANTED = "GRANTED"

    limit = models.CharField(max_length=100)
    key = models.CharField(max_length=200, blank=True, default="")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="limit_tickets")
    call = models.CharField(max_length=40, help_text="the call in its run: visit.call_index")
    state = models.CharField(max_length=10, choices=State.choices)
    token = models.PositiveBigIntegerField(default=0, help_text="HELD: the fencing token of the lease that took it")
    priority = models.SmallIntegerField(default=0)
    arrived_at = models.DateTimeField()
    granted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "limit", "call"], name="limit_ticket_one_per_call")]
        indexes = [models.Index(fields=["limit", "key", "state"], name="limit_ticket_state")]


class LimitUse(models.Model):
    """A call's start under a limit with a rate or tokens, and the tokens it used (added when it answered): the
    sliding window counts these. Rows older than the window are deleted as new ones come."""

    limit = models.CharField(max_length=100)
    key = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField()
    tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["limit", "key", "started_at"], name="limit_use_window")]


class StreamChunk(models.Model):
    """What a step published while it ran (`ctx.stream`), for the run's followers: not the journal (replay never
    reads it), kept for DURABLE_STREAM_RETENTION_SECONDS. Its id is the Server-Sent Events id a client resumes from
    (Last-Event-ID); one publisher's chunks commit in id order, so a follower reading `id > last` misses none."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="stream_chunks", db_index=False)  # stream_run_id
    step = models.CharField(max_length=100)
    visit = models.PositiveIntegerField(help_text="the seq of the checkpoint the visit started from")
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=40, help_text="the SSE event name: text, progress, data or the author's")
    data = models.JSONField(null=True)
    published_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "id"]
        indexes = [
            models.Index(fields=["run", "id"], name="stream_run_id"),
            models.Index(fields=["published_at"], name="stream_published_at"),
        ]

    def __str__(self) -> str:
        return f"stream chunk #{self.id} of run {self.run_id} ({self.kind})"


class PauseSwitch(models.Model):
    """A workflow's kill switch (durable/pauses.py): while it is off, its runs (of one version, or of every version
    when `workflow_version` is EVERY_VERSION) stop at their next step boundary and new starts are accepted and held PAUSED."""

    workflow_name = models.CharField(max_length=100)
    EVERY_VERSION = 0  # versions count from 1

    workflow_version = models.PositiveIntegerField(default=EVERY_VERSION, help_text="0: every version")
    reason = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow_name", "workflow_version"]
        constraints = [models.UniqueConstraint(fields=["workflow_name", "workflow_version"],
                                               name="pause_switch_one_per_version")]

    def __str__(self) -> str:
        version = f" v{self.workflow_version}" if self.workflow_version != self.EVERY_VERSION else ""
        return f"{self.workflow_name}{version} paused"


class Schedule(models.Model):
    """A workflow started on a cron expression in a time zone (durable/schedules.py): each fire time starts one
    run, whose idempotency key is the schedule's id and the fire time. Declared with the workflow in
    code (`declared_in_code`: the code owns its definition) or created by an operator."""

    class Overlap(models.TextChoices):
        SKIP = "skip", "Skip while the last run is active"
        START_ANYWAY = "start_anyway", "Start anyway"

    class CatchUp(models.TextChoices):
        NONE = "none", "None"
        LATEST = "latest", "The latest missed fire time"
        ALL = "all", "All within the window"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100, unique=True)
    workflow = models.CharField(max_length=200)
    cron = models.CharField(max_length=200)
    time_zone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)
    business_key_template = models.CharField(max_length=200)
    overlap = models.CharField(max_length=20, choices=Overlap.choices, default=Overlap.SKIP)
    catch_up = models.CharField(max_length=10, choices=CatchUp.choices, default=CatchUp.LATEST)
    catch_up_window = models.PositiveIntegerField(default=86400, help_text="seconds: how far back ALL catches up")
    paused = models.BooleanField(default=False)
    declared_in_code = models.BooleanField(default=False)
    # The first fire time not yet handled, by the database's clock; the sweeper's due query reads it.
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fire_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_outcome = models.CharField(max_length=500, blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("manage_schedule", "Can create, edit, pause and delete schedules")]
        indexes = [models.Index(fields=["next_fire_at"], name="schedule_due",
                                condition=Q(paused=False, next_fire_at__isnull=False))]

    def __str__(self) -> str:
        return f"schedule {self.name}: {self.workflow} at {self.cron!r} ({self.time_zone})"
