"""The header's navigation: durable's own links, then those the apps built on the core add.

An app registers a `NavEntry` from its AppConfig.ready(): the template of its link (its badge included,
shown only to those who may follow it) and the template of the badge alone, which every live region's
answer carries out of band (durable/templates/durable/_live_oob.html). The count behind a badge is
registered with `durable.console.live.nav_count`, so a live region's version changes with it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NavEntry:
    link: str  # a template rendering the <a> (or nothing, for a user who may not follow it)
    badge: str  # a template rendering the badge alone, out of band (`oob` is true in its context)


_entries: dict[str, NavEntry] = {}


def add_to_nav(name: str, entry: NavEntry) -> None:
    """Called from an app's ready(): links follow durable's own in the order the apps were installed."""
    _entries[name] = entry


def nav_entries() -> list[NavEntry]:
    return list(_entries.values())
