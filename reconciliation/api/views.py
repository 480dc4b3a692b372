from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from durable.api.errors import LabelledErrors, service_errors
from durable.api.pagination import CursorPages
from durable.api.permissions import ActionPermission
from durable.engine.ids import OPERATION_ID_PATTERN
from durable.engine.ledger import OperationStatus
from durable.models import SideEffect
from durable.permissions import can_see_contents
from reconciliation.api.serializers import OperationSerializer, ResolveSerializer
from reconciliation.services import resolve_operation

PERMISSIONS = {"list": "durable.view_sideeffect", "retrieve": "durable.view_sideeffect",
               "resolve": "durable.resolve_sideeffect"}


class OperationPermission(ActionPermission):
    """Every action answers a ledger row, so each needs the contents rule as well as its own permission."""

    permissions = PERMISSIONS

    def has_permission(self, request: Request, view: APIView) -> bool:
        return super().has_permission(request, view) and can_see_contents(request.user)


class OperationFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(OperationStatus), required=False)
    action = serializers.CharField(max_length=100, required=False)
    run = serializers.UUIDField(required=False)


class OldestFirst(CursorPages):
    ordering = ("updated_at", "operation_id")
    page_size_query_param = None  # fifty a page, whatever is asked


class OperationViewSet(LabelledErrors, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The side-effect ledger, oldest first; UNKNOWN operations are resolved here."""

    permission_classes = [OperationPermission]
    serializer_class = OperationSerializer
    pagination_class = OldestFirst
    queryset = SideEffect.objects.select_related("resolved_by")
    lookup_value_regex = OPERATION_ID_PATTERN  # anything else (a NUL, %00, included) is a 404, never a query

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        if self.action == "list":
            filters = OperationFilterSerializer(data=self.request.query_params)
            filters.is_valid(raise_exception=True)
            lookups = {"status": "status", "action": "action_name", "run": "run_id"}
            queryset = queryset.filter(**{lookups[k]: v for k, v in filters.validated_data.items()})
        return queryset

    @extend_schema(parameters=[OperationFilterSerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(request=ResolveSerializer, responses=OperationSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        operation = self.get_object()
        payload = ResolveSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        with service_errors():
            resolved = resolve_operation(operation_id=operation.operation_id, user=request.user, source="api",
                                         **payload.validated_data)
        return Response(OperationSerializer(resolved).data)
