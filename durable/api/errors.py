"""Service errors as API answers: bad input is a 400 naming the field, a stale state a 409."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError

from durable import services


class ConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"

    def __init__(self, exc: services.Conflict) -> None:
        super().__init__({"detail": str(exc), "current_status": exc.current, **exc.extra})


class UnavailableError(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"


@contextmanager
def service_errors() -> Iterator[None]:
    """Wrap a service call made by an endpoint."""
    try:
        yield
    except services.InvalidInput as exc:
        raise ValidationError(exc.errors) from None
    except services.Conflict as exc:
        raise ConflictError(exc) from None
    except services.Forbidden as exc:
        raise PermissionDenied(str(exc)) from None
    except services.Unavailable as exc:
        raise UnavailableError(str(exc)) from None


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's handler404: under /api/ a URL that matches no route (e.g. an id that is not a UUID) is
    answered in JSON like every other API error, not with the console's HTML page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception)
