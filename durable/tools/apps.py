"""The tools app: the demo launcher, the benchmark, the drill and the scale-out harness, as management commands."""
from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "durable.tools"
    label = "durable_tools"
    verbose_name = "durable's tools"

    def ready(self) -> None:
        from durable.runtime import fault_points
        from durable.tools import checks  # noqa: F401  registers the tools' checks
        from durable.tools.faults import crash_if_armed

        # Armed only by DURABLE_FAULT_POINTS in a worker's environment (the drill's and the scale-out's workers).
        fault_points.add_hook(crash_if_armed)
