"""The tools app: the demo launcher, the benchmark, the drill and the scale-out harness, as management commands."""
from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "durable.tools"
    label = "durable_tools"
    verbose_name = "durable's tools"
