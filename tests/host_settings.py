"""A host project's settings in miniature: durable's three apps, without the tools app, mounted under /ops/."""
from durable.project.settings import *  # noqa: F403

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "durable.tools"]  # noqa: F405
DURABLE_WORKFLOW_MODULES: list[str] = []
ROOT_URLCONF = "tests.durable.mounted_urls"
