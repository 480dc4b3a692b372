"""durable's standalone project: its settings, root URLs, WSGI/ASGI entry points and Celery app.

A host project has its own and never imports this package. Loading these settings imports
the Celery app, so that shared tasks bind to it in every process (Celery's Django layout).
"""
from durable.project.celery import app as celery_app

__all__ = ["celery_app"]
