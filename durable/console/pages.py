"""The page that shows an object the core knows of but an app built on it owns the screen of.

The run page links to its approval requests and to the operations waiting for reconciliation, the
overview to the reconciliation queue, the audit trail to an operation, a notification to its subject.
Those pages are the apps': each registers the kinds it shows from its ready() (`add_page`), and
`page_url` answers "" when no installed app shows a kind, its URLs are not mounted, or the user may
not follow the link; a link the core cannot make is left out, never broken.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class Page:
    url_name: str  # reversed with the object's id (or nothing, for a list)
    permission: str = ""  # what a user needs to follow the link ("" : whoever sees the page that links to it)


_pages: dict[str, Page] = {"run": Page("durable:run-detail")}


def add_page(kind: str, page: Page) -> None:
    """Called from an app's ready(): the page that shows objects of `kind` ("approval", "operation"...)."""
    _pages[kind] = page


def page_url(kind: str, *args: Any, user: Any = None) -> str:
    page = _pages.get(kind)
    if page is None or (page.permission and user is not None and not user.has_perm(page.permission)):
        return ""
    try:
        return reverse(page.url_name, args=[str(arg) for arg in args])
    except NoReverseMatch:  # a host that does not mount that app's pages
        return ""
