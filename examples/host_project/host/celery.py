"""The host's own Celery app. It finds durable's tasks (`@shared_task`) as it finds its own: autodiscover_tasks()."""
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")

app = Celery("host")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _make_broker_folders(sender: Celery, **_: object) -> None:
    # kombu's filesystem transport (the broker when CELERY_BROKER_URL is unset) expects its folders to exist.
    for key in ("data_folder_in", "control_folder"):
        folder = sender.conf.broker_transport_options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)


@task_prerun.connect
@task_postrun.connect
def _close_old_database_connections(**_: object) -> None:
    # As Django does around each request: a long-lived worker drops broken or expired connections.
    from django.db import close_old_connections

    close_old_connections()
