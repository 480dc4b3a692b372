"""The REST API: start runs, list and read them, and steer them."""
from __future__ import annotations

from typing import Any

from django.db.models import Q
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from durable import forks, pauses, services, versions
from durable.api.bulk import BulkResultSerializer, BulkSerializer, bulk_answer
from durable.api.errors import LabelledErrors, service_errors
from durable.api.events import (
    SEND_DESCRIPTION,
    SEND_PARAMETERS,
    SEND_RESPONSES,
    MailboxPagination,
    RunEventContentsSerializer,
    RunEventSerializer,
    SendEventSerializer,
    deliver,
)
from durable.api.filters import ORDERS, RunFilterSerializer, filter_runs, position
from durable.api.idempotency import HEADER, idempotency_key
from durable.api.pagination import CursorPages
from durable.api.permissions import RunPermission, reads_as_sender
from durable.api.schema import ConflictSerializer
from durable.api.serializers import (
    CancelledRunSerializer,
    ForkSerializer,
    MigrateBlockedResultSerializer,
    MigrateBlockedSerializer,
    MigrateSerializer,
    RaiseBudgetSerializer,
    ReasonSerializer,
    RunDetailSerializer,
    RunSerializer,
    StartRunSerializer,
)
from durable.models import Run, RunEvent
from durable.permissions import can_see_contents
from durable.registry import registry

EXISTING_RUN_HEADER = "Durable-Existing-Run"
IDEMPOTENCY_KEY, ACTIVE_BUSINESS_KEY = "idempotency-key", "active-business-key"
START_DESCRIPTION = f"""Start a run of the workflow's current version.

When the business key already has an active run (one that has not ended) of this workflow, the workflow's
`on_active_business_key` policy answers: `return_existing` (the default) answers 200 with that run and the
`{EXISTING_RUN_HEADER}: {ACTIVE_BUSINESS_KEY}` header; `refuse` answers 409 naming it (`active_run`);
`start_another` starts a new run. Two concurrent starts never both create where one active run is allowed.
Each workflow's policy is listed under `x-on-active-business-key` of this operation."""


class ActiveRunConflictSerializer(ConflictSerializer):
    active_run = serializers.UUIDField(required=False, help_text="the business key's active run, when that is the "
                                                                 "conflict (on_active_business_key=refuse)")


class RunCursorPagination(CursorPages):
    ordering = ORDERS["newest"]

    def get_ordering(self, request: Request, queryset: Any, view: Any) -> tuple[str, ...]:
        """The list's `order` (validated with the filters): newest first, or the most expensive or most tokens."""
        return ORDERS.get(request.query_params.get("order", ""), self.ordering)

    def check_position(self, request: Request, text: str) -> None:
        """The position is a time, an amount or a count, as the list's `order` says."""
        order = request.query_params.get("order", "")
        position(order if order in ORDERS else "newest", text)


@extend_schema(parameters=[HEADER])
class RunViewSet(LabelledErrors, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    permission_classes = [RunPermission]
    pagination_class = RunCursorPagination
    queryset = Run.objects.all()

    def schema_extensions(self) -> dict[str, Any]:
        """Each workflow's on_active_business_key policy (its current version's), in the start operation's schema."""
        if self.action != "create":
            return {}
        names = sorted({wf.name for wf in registry.all()})
        return {"x-on-active-business-key": {name: registry.current(name).on_active_business_key.value
                                             for name in names}}

    def get_serializer_class(self) -> type:
        if self.action == "create":
            return StartRunSerializer
        if self.action == "retrieve":
            # Checkpoints, journal and ledger rows only under the contents rule; else the run's status and metadata.
            return RunDetailSerializer if can_see_contents(self.request.user) else RunSerializer
        if self.action in {"cancel", "retry", "resume", "pause"}:
            return ReasonSerializer
        if self.action == "migrate":
            return MigrateSerializer
        if self.action == "fork":
            return ForkSerializer
        if self.action == "migrate_blocked":
            return MigrateBlockedSerializer
        if self.action == "bulk":
            return BulkSerializer
        if self.action == "send_event":
            return SendEventSerializer
        if self.action == "events":
            return RunEventContentsSerializer if can_see_contents(self.request.user) else RunEventSerializer
        if self.action == "budget":
            return RaiseBudgetSerializer
        return RunSerializer

    def get_queryset(self) -> Any:
        queryset = Run.objects.all()
        if self.action == "list":
            filters = RunFilterSerializer(data=self.request.query_params)
            filters.is_valid(raise_exception=True)
            queryset = filter_runs(queryset, filters.validated_data)
        if self.action == "retrieve" and can_see_contents(self.request.user):
            queryset = queryset.prefetch_related("checkpoints", "journal", "side_effects")
        if reads_as_sender(self.request, self):  # a webhook: only the runs it sent an event to (or started)
            user = self.request.user.pk  # logged in: RunPermission let it through
            queryset = queryset.filter(Q(created_by_id=user) | Q(id__in=RunEvent.objects.filter(sent_by_id=user)
                                                                         .values("run_id")))
        return queryset

    @extend_schema(parameters=[RunFilterSerializer], responses=RunSerializer(many=True))
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=RunDetailSerializer, description=(
        "The run with its checkpoints, journal and ledger rows. Those three lists are left out for a caller "
        "without the contents permissions (view_checkpoint, view_journalentry, view_sideeffect): view_run "
        "alone shows the run's status and metadata."))
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        request=StartRunSerializer,
        description=START_DESCRIPTION,
        responses={
            201: OpenApiResponse(RunSerializer, description="A new run was started"),
            200: OpenApiResponse(RunSerializer, description="No new run: the existing one, as the "
                                 f"{EXISTING_RUN_HEADER} header says why"),
            409: OpenApiResponse(ActiveRunConflictSerializer, description="The workflow refuses a second active run "
                                 "for this business key (on_active_business_key=refuse), or the Idempotency-Key was "
                                 "used for a different request"),
        },
        parameters=[OpenApiParameter(EXISTING_RUN_HEADER, str, OpenApiParameter.HEADER, response=[200],
                                     enum=[IDEMPOTENCY_KEY, ACTIVE_BUSINESS_KEY],
                                     description="why no new run was started: a retry with the same Idempotency-Key, "
                                                 "or the business key's active run (on_active_business_key=return_existing)")],
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = StartRunSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        key = idempotency_key(request, data)
        with service_errors():
            run, created = services.start_run(
                workflow=data["workflow"], input=data["input"], business_key=data["business_key"],
                idempotency_key=key, user=request.user, version=data.get("version"), reason=data["reason"],
                source="api", priority=data["priority"],
            )
        body = RunSerializer(run, context=self.get_serializer_context()).data
        if created:
            return Response(body, status=status.HTTP_201_CREATED)
        why = IDEMPOTENCY_KEY if key and run.idempotency_key == key else ACTIVE_BUSINESS_KEY
        return Response(body, status=status.HTTP_200_OK, headers={EXISTING_RUN_HEADER: why})

    def _steer(self, request: Request, operation: Any, payload_class: type[ReasonSerializer] = ReasonSerializer,
               ) -> Response:
        """The run's service `operation` with what the payload validated (a reason, and what else it takes)."""
        run = self.get_object()
        payload = payload_class(data=request.data)
        payload.is_valid(raise_exception=True)
        with service_errors():
            run = operation(run_id=run.id, user=request.user, source="api", **payload.validated_data)
        return Response(RunSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(request=ReasonSerializer, responses=CancelledRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the run; the answer says which side effects had already happened (with their references),
        which may have (a call in flight), and what the cancel stopped."""
        run = self.get_object()
        payload = ReasonSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        with service_errors():
            cancellation = services.cancel_run(run_id=run.id, user=request.user, source="api",
                                               reason=payload.validated_data["reason"])
        body = RunSerializer(cancellation.run, context=self.get_serializer_context()).data
        return Response({**body, "cancellation": cancellation.as_json()})

    @extend_schema(request=ReasonSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str | None = None) -> Response:
        return self._steer(request, services.retry_run)

    @extend_schema(request=ReasonSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Resume a PAUSED run where it stopped (or forget a pause still only asked for), or a BLOCKED_VERSION run
        once its version is deployed again. 409 for a run that is neither."""
        return self._steer(request, pauses.resume_run)

    @extend_schema(request=ReasonSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        """Pause the run: at once when no worker holds it (a parked run stays parked), else at its next step
        boundary, once the call in flight is recorded (`pause_requested_at` set, status still RUNNING until then).
        409 for a run that has ended or is paused already."""
        return self._steer(request, pauses.pause_run)

    @extend_schema(request=ForkSerializer, responses={201: RunSerializer}, description=(
        "Start a new run (a fork) from checkpoint `checkpoint` of this run, in any status: on its version or a newer "
        "one that takes over from there (`version`; 409 naming the difference when it cannot), with the "
        "checkpoint's state or an edited one (`state`, validated by the state model: 400 naming the field). The "
        "fork never performs again a side effect its family performed (the same action and business key): it "
        "takes that run's recorded result. 404 for a checkpoint the run does not have."))
    @action(detail=True, methods=["post"])
    def fork(self, request: Request, pk: str | None = None) -> Response:
        origin = self.get_object()
        payload = ForkSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        with service_errors():
            try:
                run = forks.fork_run(run_id=origin.id, seq=data["checkpoint"], version=data.get("version"),
                                     state=data.get("state"), reason=data["reason"], user=request.user, source="api")
            except forks.NoSuchCheckpoint as missing:
                raise NotFound(str(missing)) from None
        return Response(RunSerializer(run, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RaiseBudgetSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def budget(self, request: Request, pk: str | None = None) -> Response:
        """Raise the budget of a run its budget stopped (NEEDS_ATTENTION, error kind `budget_exhausted`): each
        limit given must be one the run has, above it and above what the run used. The run goes on at once from
        the visit it stopped in. 409 when the run no longer waits on its budget."""
        return self._steer(request, services.raise_budget, RaiseBudgetSerializer)

    @extend_schema(request=MigrateSerializer, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def migrate(self, request: Request, pk: str | None = None) -> Response:
        """Move a BLOCKED_VERSION run onto a version that declares a migration from its own."""
        return self._steer(request, versions.migrate_run, MigrateSerializer)

    @extend_schema(request=MigrateBlockedSerializer, responses=MigrateBlockedResultSerializer)
    @action(detail=False, methods=["post"], url_path="migrate-blocked")
    def migrate_blocked(self, request: Request) -> Response:
        """Migrate every blocked run of one version; says which were refused and why."""
        payload = MigrateBlockedSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        migrated, refused = versions.migrate_blocked_runs(user=request.user, source="api", **payload.validated_data)
        return Response({"migrated": [str(r.id) for r in migrated], "refused": refused})

    @extend_schema(request=BulkSerializer, responses=BulkResultSerializer)
    @action(detail=False, methods=["post"], url_path="bulk")
    def bulk(self, request: Request) -> Response:
        """Cancel or retry many runs with one reason: each through the single-run action, with its permission,
        its status rule and an audit row of its own (linked by `bulk_id`); a run that changed meanwhile is skipped.
        `dry_run` answers what would happen and writes nothing. At most DURABLE_BULK_LIMIT runs."""
        return Response(bulk_answer(request))

    @extend_schema(responses=RunEventContentsSerializer(many=True), description=(
        "The run's mailbox, in arrival order: each event's name, sender, when it arrived and which wait took it "
        "(consumed_at, consumed_step, consumed_visit; null while it waits in the mailbox). The payload is left out "
        "for a caller without the contents permissions (view_checkpoint, view_journalentry, view_sideeffect)."))
    @action(detail=True, methods=["get"], url_path="events", pagination_class=MailboxPagination)
    def events(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        page = self.paginate_queryset(RunEvent.objects.filter(run=run))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=SendEventSerializer, responses=SEND_RESPONSES, parameters=SEND_PARAMETERS,
                   description=SEND_DESCRIPTION)
    @events.mapping.post
    def send_event(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        payload = SendEventSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return deliver(request, payload, run_id=run.id)
