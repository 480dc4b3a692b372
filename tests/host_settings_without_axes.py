"""A host project that has not added django-axes: durable's three apps, no "axes" app, middleware or backend."""
from tests.host_settings import *  # noqa: F403

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "axes"]  # noqa: F405
MIDDLEWARE = [layer for layer in MIDDLEWARE if not layer.startswith("axes.")]  # noqa: F405
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
