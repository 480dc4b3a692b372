"""The approvals API: the inbox, one request with its current facts, and decisions."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import services
from approvals.api.serializers import (
    ApprovalDetailSerializer,
    ApprovalFilterSerializer,
    ApprovalSerializer,
    DecideSerializer,
    RevalidationSerializer,
)
from approvals.models import ApprovalRequest
from approvals.selectors import filter_requests
from durable.api.errors import LabelledErrors, service_errors
from durable.api.pagination import CursorPages
from durable.api.permissions import ActionPermission
from durable.engine.approvals import Verdict, differences
from durable.permissions import signed_in

VIEW, DECIDE = "approvals.view_approvalrequest", services.DECIDE_PERMISSION
PERMISSIONS = {"list": VIEW, "retrieve": VIEW, "revalidation": VIEW, "approve": DECIDE, "reject": DECIDE}


class ApprovalPermission(ActionPermission):
    permissions = PERMISSIONS


class SoonestExpiryFirst(CursorPages):
    ordering = ("expires_at", "id")


class ApprovalViewSet(LabelledErrors, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Approval requests, soonest expiry first; PENDING ones are decided here."""

    permission_classes = [ApprovalPermission]
    pagination_class = SoonestExpiryFirst
    queryset = ApprovalRequest.objects.select_related("decided_by")

    def get_serializer_class(self) -> type:
        if self.action == "retrieve":
            return ApprovalDetailSerializer
        if self.action in {"approve", "reject"}:
            return DecideSerializer
        return ApprovalSerializer

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        if self.action == "list":
            filters = ApprovalFilterSerializer(data=self.request.query_params)
            filters.is_valid(raise_exception=True)
            queryset = filter_requests(queryset, filters.validated_data)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("decisions__user")
        return queryset

    @extend_schema(parameters=[ApprovalFilterSerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=RevalidationSerializer)
    @action(detail=True, methods=["get"])
    def revalidation(self, request: Request, pk: str | None = None) -> Response:
        """Re-read the business facts now: the snapshot beside the current values, and what changed."""
        approval = self.get_object()
        with service_errors():
            check = services.revalidate(approval)
        changed = [vars(d) for d in differences(approval.snapshot, check.current)]
        return Response({"snapshot": approval.snapshot, "current": check.current, "problems": list(check.problems),
                         "differences": changed, "holds": check.holds})

    def _decide(self, request: Request, verdict: Verdict) -> Response:
        approval = self.get_object()
        payload = DecideSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        with service_errors():
            decided = services.decide(request_id=approval.id, user=signed_in(request.user), verdict=verdict, source="api",
                                      http_request=request,
                                      **payload.validated_data)
        return Response(ApprovalDetailSerializer(decided).data)

    @extend_schema(request=DecideSerializer, responses=ApprovalDetailSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve what the snapshot with `snapshot_hash` showed; 409 if it is stale or already decided."""
        return self._decide(request, Verdict.APPROVE)

    @extend_schema(request=DecideSerializer, responses=ApprovalDetailSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        """Reject with a reason; the run ends without acting."""
        return self._decide(request, Verdict.REJECT)
