"""The host's own Celery app. It finds durable's tasks (`@shared_task`) as it finds its own: autodiscover_tasks()."""
import os

from celery import Celery

from durable.runtime.worker import configure

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")

app = Celery("host")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
configure(app)  # what a Celery app running durable's tasks needs (durable/runtime/worker.py)
