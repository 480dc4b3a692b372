"""An existing Django project (the shop's) that adopts durable: its own settings, users, Celery app and URLs."""
from host.celery import app as celery_app  # Celery's Django pattern: the project's app is the current one

__all__ = ["celery_app"]
