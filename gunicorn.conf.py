"""gunicorn's configuration, read from the working directory: Prometheus multiprocess bookkeeping only.

Every other setting comes from the command line (README: `gunicorn durable.project.wsgi --workers 4 ...`).
Loading durable's settings here sets PROMETHEUS_MULTIPROC_DIR in the master before it forks,
so every web worker writes its counters to the directory that /metrics reads.

The directory is not wiped here: Celery workers on this machine write to it too, and wiping it
under them would lose their counts. Clear it in the deploy script before starting web and
workers together (`rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db`), as `manage.py durable_up` does.
"""
import os as _os
from typing import Any as _Any

_os.environ.setdefault("DJANGO_SETTINGS_MODULE", "durable.project.settings")

from django.conf import settings as _settings  # noqa: E402  after the settings module is chosen

_settings.DURABLE_METRICS_DIR  # noqa: B018  loading the settings sets PROMETHEUS_MULTIPROC_DIR


def child_exit(server: _Any, worker: _Any) -> None:
    # A dead worker's counters stay (they are part of the totals); only its live-gauge files,
    # which would report a process that no longer exists, are removed.
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
