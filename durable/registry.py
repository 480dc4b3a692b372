"""The workflow registry: every version of every workflow this process can run."""
from __future__ import annotations

import logging
from importlib import import_module

from durable.workflow import Workflow

log = logging.getLogger("durable.registry")


class UnknownWorkflow(LookupError):
    pass


class WorkflowRegistry:
    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int], Workflow] = {}
        self.import_failures: dict[str, str] = {}  # module path -> why it did not import (durable.E012)

    def register(self, workflow: Workflow) -> Workflow:
        """Add a workflow version; a ValueError if its routes or migrations name a step it does not have.

        A workflow registered before its steps are declared (`wf = register(Workflow(...))`, then
        `@wf.step`) is checked again when `discover` has imported its module, and at its first use."""
        workflow.validate()
        key = (workflow.name, workflow.version)
        existing = self._by_key.get(key)
        if existing is not None and existing is not workflow:
            raise ValueError(f"workflow {workflow.name} v{workflow.version} is registered twice")
        self._by_key[key] = workflow
        return workflow

    def get(self, name: str, version: int) -> Workflow:
        try:
            return self._by_key[(name, version)]
        except KeyError:
            raise UnknownWorkflow(f"this process has no workflow {name!r} version {version}") from None

    def current(self, name: str) -> Workflow:
        """The version new runs start on: the newest registered. Older ones only finish their runs."""
        return self.latest(name)

    def latest(self, name: str) -> Workflow:
        versions = [wf for (n, _), wf in self._by_key.items() if n == name]
        if not versions:
            raise UnknownWorkflow(f"no workflow named {name!r} is registered")
        return max(versions, key=lambda wf: wf.version)

    def names(self) -> list[str]:
        return sorted({n for n, _ in self._by_key})

    def all(self) -> list[Workflow]:
        return sorted(self._by_key.values(), key=lambda wf: (wf.name, wf.version))

    def validate(self) -> None:
        """Check every registered graph now that its steps are declared: a workflow whose routes name no
        step is taken out of the registry (its runs are blocked, never run) and a ValueError names it."""
        problems = []
        for key, workflow in list(self._by_key.items()):
            try:
                workflow.validate()
            except ValueError as exc:
                del self._by_key[key]
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))


registry = WorkflowRegistry()


def register(workflow: Workflow) -> Workflow:
    """Register a workflow version with the process-wide registry."""
    return registry.register(workflow)


def discover(modules: list[str]) -> None:
    """Import `workflows` modules of installed apps and the modules named in settings.

    A named module that fails to import is remembered, not raised: the process still starts, so
    `manage.py check` can name the module and the error (durable.E012) instead of every command
    dying in a traceback; the runs of its workflows are blocked, never run on other code.
    """
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("workflows")
    registry.validate()
    for path in modules:
        try:
            import_module(path)
            registry.validate()  # its workflows' steps are all declared now: their routes must name steps
        except Exception as exc:  # any error in a workflow module's own code
            registry.import_failures[path] = f"{type(exc).__name__}: {exc}"
            log.error("workflow module %s does not import: %s", path, exc)
        else:
            registry.import_failures.pop(path, None)
