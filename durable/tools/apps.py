"""The tools app: the demo launcher, the benchmark, the drill and the scale-out harness, as management commands."""
from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "durable.tools"
    label = "durable_tools"
    verbose_name = "durable's tools"

    def ready(self) -> None:
        from celery.signals import worker_ready

        from durable.runtime import fault_points
        from durable.tools import checks  # noqa: F401  registers the tools' checks
        from durable.tools.faults import crash_if_armed
        from durable.tools.processes import announce_ready

        # Armed only by DURABLE_FAULT_POINTS in a worker's environment (the drill's and the scale-out's workers).
        fault_points.add_hook(crash_if_armed)
        # The workers the tools start say when they consume, whichever project's Celery app they run (a host's).
        worker_ready.connect(announce_ready, weak=False, dispatch_uid="durable-tools-worker-ready")
