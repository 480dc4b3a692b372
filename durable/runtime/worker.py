"""What any Celery app that runs durable's tasks needs, the standalone project's or a host's: one call, `configure(app)`.

Importing this module does nothing; a project's own Celery module calls `configure(app)` once.
"""
from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun


def configure(app: Celery) -> None:
    """Make `app` fit to advance runs: broker folders for kombu's filesystem transport, and connections
    kept between tasks the way Django keeps them between requests."""
    app.on_after_configure.connect(_make_broker_folders, weak=False)
    task_prerun.connect(_close_old_database_connections, weak=False, dispatch_uid="durable-close-old-connections-pre")
    task_postrun.connect(_close_old_database_connections, weak=False, dispatch_uid="durable-close-old-connections-post")


def _make_broker_folders(sender: Celery, **_: object) -> None:
    # kombu's filesystem transport (the embedded default) expects its folders to exist.
    for key in ("data_folder_in", "control_folder"):
        folder = sender.conf.broker_transport_options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)


def _close_old_database_connections(**_: object) -> None:
    # What Django does at each request's start and end: drop a connection that is broken or older than
    # CONN_MAX_AGE, keep the others. With CELERY_DB_REUSE_MAX set, Celery stops closing them all after
    # every task, which was the largest per-run cost durable_bench --compare measured.
    from django.db import close_old_connections

    close_old_connections()
