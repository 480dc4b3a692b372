"""The URLs the apps built on the core mount beside durable's: their screens, and their routes in the API.

`durable.urls` (what a host project includes) and `durable.api.urls` read this list; the apps fill it from
their AppConfig.ready(), which Django runs before any URLconf is loaded. The core names no app's URLs:
an app that is not installed mounts nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Mount:
    prefix: str  # where the app's screens sit under durable.urls, e.g. "approvals/"
    urls: str  # the URLconf of its screens (with its own app_name, the namespace its templates reverse)
    api_urls: str = ""  # a URLconf whose urlpatterns join the API's, under api/ in the "api" namespace


_mounts: dict[str, Mount] = {}


def mount(name: str, where: Mount) -> None:
    """Called from an app's ready(): a second call with the same name replaces the first."""
    _mounts[name] = where


def mounted() -> list[Mount]:
    return list(_mounts.values())


def api_patterns() -> list[Any]:
    """Every mounted app's API routes, in the order the apps were installed."""
    return [pattern for where in mounted() if where.api_urls for pattern in import_module(where.api_urls).urlpatterns]
