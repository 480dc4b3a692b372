"""Launch checks. `manage.py check --database default` runs the ones that read the database."""
from __future__ import annotations

from typing import Any

from django.core.checks import Tags, Warning, register
from django.db import DatabaseError


@register(Tags.database)
def unregistered_versions_in_flight(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    from durable.versions import version_reports

    try:
        reports = version_reports()
    except DatabaseError:  # not migrated yet: nothing can be in flight
        return []
    return [
        Warning(
            f"{r.in_flight_total} run(s) of {r.workflow} v{r.version} are in flight, but this code does not "
            "register that version: they will be blocked when resumed.",
            hint="Keep the version registered until `manage.py durable_versions` says it can be retired, "
                 "or migrate the runs to a version that declares a migration from it.",
            id="durable.W001",
        )
        for r in reports if not r.registered and r.in_flight_total
    ]
