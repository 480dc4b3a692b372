"""Errors as answers: bad input is a 400 naming the field, a stale state a 409, an unreadable request a 400
naming the limit it passed, an unknown URL a 404 (JSON under the API's prefix, wherever it is mounted)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.defaults import page_not_found
from rest_framework import status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from durable.errors import Conflict, Forbidden, InvalidInput, Unavailable
from durable.labels import labelled
from durable.security import refused_because


class ConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    detail: Any  # JSON values as the conflict gives them, not only DRF's ErrorDetail strings

    def __init__(self, exc: Conflict) -> None:
        super().__init__(str(exc))
        # The conflict's values as they are (null, numbers, objects): APIException would make each one a string,
        # a missing current_status the string "None".
        self.detail = {"detail": self.detail, "current_status": exc.current, **exc.extra}


class UnavailableError(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"


@contextmanager
def service_errors() -> Iterator[None]:
    """Wrap a service call made by an endpoint."""
    try:
        yield
    except InvalidInput as exc:
        raise ValidationError(exc.errors) from None
    except Conflict as exc:
        raise ConflictError(exc) from None
    except Forbidden as exc:
        denied = PermissionDenied(str(exc))
        denied.action = exc.action  # type: ignore[attr-defined]  # named in the security log's row
        raise denied from None
    except Unavailable as exc:
        raise UnavailableError(str(exc)) from None


def unreadable_request(exception: Exception) -> str:
    """Why Django refused to read a request (a SuspiciousOperation), in words naming the limit it exceeded."""
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return (f"The request body is larger than this server accepts: at most {limit:,} bytes "
                f"({limit / 2**20:.1f} MiB, DATA_UPLOAD_MAX_MEMORY_SIZE). Nothing was done; send less.")
    if isinstance(exception, TooManyFieldsSent):
        return (f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields "
                "(DATA_UPLOAD_MAX_NUMBER_FIELDS). Nothing was done.")
    if isinstance(exception, TooManyFilesSent):
        return (f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files "
                "(DATA_UPLOAD_MAX_NUMBER_FILES). Nothing was done.")
    return "The request could not be read. Nothing was done."


def is_api(request: HttpRequest) -> bool:
    """Whether the request is for the API: its path is under the API's root, under whatever prefix it is mounted."""
    try:
        return request.path.startswith(reverse("api:api-root"))
    except NoReverseMatch:  # a project that does not mount the API
        return False


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's handler400, for requests it refuses to read (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, too many
    fields): a JSON answer under /api/, a console page elsewhere, each saying which limit was passed."""
    message = unreadable_request(exception)
    if is_api(request):
        return JsonResponse({"detail": message}, status=status.HTTP_400_BAD_REQUEST)
    return render(request, "durable/400.html", {"message": message}, status=status.HTTP_400_BAD_REQUEST)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's handler404: under /api/ a URL that matches no route (e.g. an id that is not a UUID) is
    answered in JSON like every other API error, not with the console's HTML page."""
    if is_api(request):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception)


def labelled_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, with a 400's messages led by each field's label (durable.labels), keys left as sent."""
    response = drf_exception_handler(exc, context)
    if isinstance(exc, PermissionDenied) and "request" in context:  # the 403's row in the security log says why
        refused_because(context["request"], str(exc.detail), getattr(exc, "action", ""))
    if response is not None and response.status_code == status.HTTP_400_BAD_REQUEST:
        response.data = labelled(response.data)
    return response


class LabelledErrors:
    """A viewset mixin: its 400 answers name fields as an operator reads them, whatever the host's settings."""

    def get_exception_handler(self) -> Callable[[Exception, dict], Response | None]:
        return labelled_exception_handler
