"""ASGI entry point for the standalone project."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "durable.project.settings")
application = get_asgi_application()
