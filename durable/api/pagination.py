"""The API's cursor pages: one class for every list, so a bad cursor is the same 400 naming `cursor` everywhere.

DRF answers a cursor it cannot decode with 404, and passes a decoded position (`p=`) to the database unread: a
position its column cannot hold (`p=abc` on an id, `p=1e999`) became a 500. Here both are bad input, a 400 naming
the field, as every other bad parameter of a list is (docs/api.md)."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as FieldError
from django.db.models import Field, Model
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

INVALID_CURSOR = ("Invalid cursor: use the `next` or `previous` link of a page of this list, as it was given "
                  "(with the same `order`)")


class CursorPages(CursorPagination):
    """Cursor pagination whose cursor is checked whole: its encoding, its offset and its position."""

    page_size = 50
    page_size_query_param: str | None = "page_size"
    max_page_size = 500
    model: type[Model] | None = None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any] | None:
        self.model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise invalid_cursor() from None
        if cursor is not None and cursor.position is not None:
            try:
                self.check_position(request, str(cursor.position))
            except (ValueError, TypeError, ArithmeticError, FieldError):
                raise invalid_cursor() from None
        return cursor

    def check_position(self, request: Request, position: str) -> None:
        """Raise ValueError (or a field's ValidationError) unless the first ordering column can hold `position`."""
        name = self.ordering[0].lstrip("-")  # a tuple once paginate_queryset has read get_ordering()
        try:
            field = self.model._meta.get_field(name) if self.model is not None else None
        except FieldDoesNotExist:
            field = None
        if not isinstance(field, Field):
            raise ValueError(f"no column {name!r} to hold a position")
        field.clean(position, None)  # the column's own parsing and range (an integer past a bigint included)


def invalid_cursor() -> ValidationError:
    return ValidationError({"cursor": [INVALID_CURSOR]})
