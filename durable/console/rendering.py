"""What every console screen shares: a fragment for htmx or the whole page, keyset page links, outcomes."""
from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from durable.console.requests import ConsoleRequest


@dataclass(frozen=True)
class ActionOutcome:
    """What an action did, shown in the panel it was asked from."""

    level: str  # "success" or "error"
    message: str


def fragment_or_page(request: ConsoleRequest, fragment: str, page: str, context: dict[str, Any],
                     status: int = HTTPStatus.OK) -> HttpResponse:
    """htmx asked for the rows (or a panel); a browser for the whole page.

    A list whose filters are refused answers 400 with its error row (htmx-config swaps 400s in place).
    """
    if context.get("errors") and status == HTTPStatus.OK:
        status = HTTPStatus.BAD_REQUEST
    response = render(request, fragment if request.htmx else page, context, status=status)
    patch_vary_headers(response, ("HX-Request",))  # a cache must not serve the fragment as the page
    return response


def page_link(request: HttpRequest, path: str, after: str | None) -> str:
    """This list with every filter kept (a page is a deep link), starting after `after` or at the top."""
    query = request.GET.copy()
    query.pop("after", None)
    if after is not None:
        query["after"] = after
    return f"{path}?{query.urlencode()}"


def next_page_link(request: HttpRequest, path: str, found: list[Any], size: int, marker: Any) -> str:
    """A link to the next page when `found` (one row more than a page) has one; `marker(row)` keys it."""
    return page_link(request, path, marker(found[size - 1])) if len(found) > size else ""
