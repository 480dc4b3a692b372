"""The OpenAPI schema documents the error answers too, so a client (and schemathesis) knows every status it may get.

Every operation may answer 401 (no or a bad token), 403 (a permission it lacks) and 429 (throttled).
Operations that read input (a body, or a list's filters and cursor) may answer 400 naming the field; those
that look an object up 404; POST actions 409 on a stale state, and 503 when a downstream they must ask did not
answer.
"""
from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class ConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    current_status = serializers.CharField(allow_null=True, required=False,
                                           help_text="the state that made the action impossible")


FIELD_ERRORS = OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid input (a list's cursor included): each "
                               "offending field with its errors")
AUTH = OpenApiResponse(ErrorSerializer, description="No credentials, or invalid ones")
DENIED = OpenApiResponse(ErrorSerializer, description="A permission this operation needs is missing")
NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such object")
CONFLICT = OpenApiResponse(ConflictSerializer, description="The object is not in a state that allows this")
THROTTLED = OpenApiResponse(ErrorSerializer, description="Too many requests")
UNAVAILABLE = OpenApiResponse(ErrorSerializer, description="A downstream this operation must ask did not answer")


class AutoSchema(SpectacularAutoSchema):
    def _error_responses(self) -> dict[str, OpenApiResponse]:
        writes = self.method in {"POST", "PUT", "PATCH"}
        is_list = self.method == "GET" and self._is_list_view()
        errors = {"401": AUTH, "403": DENIED, "429": THROTTLED}
        if writes or is_list:
            errors["400"] = FIELD_ERRORS
        if "{" in self.path:
            errors["404"] = NOT_FOUND
        if writes:
            errors["409"] = CONFLICT
            errors["503"] = UNAVAILABLE
        if self.path.endswith("/revalidation/"):
            errors["503"] = UNAVAILABLE
        return errors

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction == "response":
            for code, response in self._error_responses().items():
                responses.setdefault(code, self._get_response_for_code(response, code, direction=direction))
        return dict(sorted(responses.items()))

    def get_extensions(self) -> dict[str, Any]:
        """The view's own `x-` extensions, read when the schema is generated (e.g. each workflow's start policy)."""
        extensions = super().get_extensions()
        more = getattr(self.view, "schema_extensions", None)
        return {**extensions, **more()} if more is not None else extensions
