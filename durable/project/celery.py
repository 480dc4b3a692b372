"""The standalone project's Celery application (durable creates no other): workers advance runs, beat sweeps.

It finds the apps' tasks (`@shared_task`) with autodiscover_tasks(), as a host project's own app would. A worker
the tools start says when it consumes through the tools app (durable.tools.processes.announce_ready).
"""
import logging
import logging.config
import os

from celery import Celery
from celery.signals import setup_logging, worker_init

from durable.runtime.worker import configure

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "durable.project.settings")

app = Celery("durable")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
configure(app)  # broker folders, and database connections kept between tasks (durable/runtime/worker.py)


@setup_logging.connect
def _use_django_logging(loglevel: int | str | None = None, **_: object) -> None:
    # With a receiver here Celery leaves the root logger alone instead of hijacking it, so a
    # worker logs through settings.LOGGING like the web: the same format, the run's fields.
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    if loglevel:  # `celery worker --loglevel` still sets how chatty Celery itself is
        logging.getLogger("celery").setLevel(loglevel)


@worker_init.connect
def _runs_wait_for_a_connection(**_: object) -> None:
    """A worker's runs wait for a connection of its pool (DURABLE_DB_POOL_TIMEOUT_SECONDS, generous), where a web
    request gives up after a few seconds (the project's settings): set before the pool first opens, or opened anew.
    Its writer's connection is taken from the pool's size."""
    from django.conf import settings
    from django.db import connections

    from durable.conf import durable_settings
    from durable.store import batched

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["timeout"] = float(durable_settings.DURABLE_DB_POOL_TIMEOUT_SECONDS)
        if batched.wanted() and int(pool.get("max_size", 4)) > 1:
            # The writer's own connection (durable/store/batched.py) is one of DURABLE_DB_POOL_SIZE: the process
            # opens no more than the setting says.
            pool["max_size"] = int(pool.get("max_size", 4)) - 1
            pool["min_size"] = min(int(pool.get("min_size", 1)), pool["max_size"])
        connections["default"].close_pool()  # type: ignore[attr-defined]  # the Postgres backend's; one made already
