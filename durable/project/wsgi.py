"""WSGI entry point for the standalone project's web processes."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "durable.project.settings")
application = get_wsgi_application()
