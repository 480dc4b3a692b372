"""The standalone project's Celery application (durable creates no other): workers advance runs, beat sweeps.

It finds the apps' tasks (`@shared_task`) with autodiscover_tasks(), as a host project's own app would.
"""
import logging
import logging.config
import os

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "durable.project.settings")

app = Celery("durable")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _make_broker_folders(sender: Celery, **_: object) -> None:
    # kombu's filesystem transport expects its folders to exist.
    for key in ("data_folder_in", "control_folder"):
        folder = sender.conf.broker_transport_options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)


@worker_ready.connect
def _announce_ready(**_: object) -> None:
    # Lets a supervisor (the demo launcher, tests, the benchmark) wait for a worker that
    # really consumes, on any broker, including ones without remote control.
    path = os.environ.get("DURABLE_WORKER_READY_FILE")
    if path:
        with open(path, "w") as ready:
            ready.write(str(os.getpid()))


@setup_logging.connect
def _use_django_logging(loglevel: int | str | None = None, **_: object) -> None:
    # With a receiver here Celery leaves the root logger alone instead of hijacking it, so a
    # worker logs through settings.LOGGING like the web: the same format, the run's fields.
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    if loglevel:  # `celery worker --loglevel` still sets how chatty Celery itself is
        logging.getLogger("celery").setLevel(loglevel)


@task_prerun.connect
@task_postrun.connect
def _close_old_database_connections(**_: object) -> None:
    # What Django does at each request's start and end: drop a connection that is broken or
    # older than CONN_MAX_AGE, keep the others (CELERY_DB_REUSE_MAX stops Celery closing them all).
    from django.db import close_old_connections

    close_old_connections()
