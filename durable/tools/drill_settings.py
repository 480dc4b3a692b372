"""The settings the fault drill runs under: a project's own, with the tools app added and the drill's values on top.

A host project never installs `durable.tools` (docs/embedding.md); its drill does, in the drill's processes only:

    DURABLE_DRILL_SETTINGS=host.settings python manage.py durable_drill --settings durable.tools.drill_settings ...

This module takes every setting of the module DURABLE_DRILL_SETTINGS names, adds `durable.tools` to
INSTALLED_APPS (the command, and the crash hook at the fault points), then sets what the drill hands its
worker processes in DURABLE_DRILL_OVERRIDES (JSON): its account's scope, its queue, the short lease and sweep,
the database and broker the drill uses, and the settings its target returns (where the stand-ins answer).
The drill's workers always load these settings, in durable's standalone project as in a host's, so a worker
the drill starts is scoped to the drill's runs whatever the project's own settings read from the environment.
"""
import json
import os
from importlib import import_module

_project = os.environ.get("DURABLE_DRILL_SETTINGS", "")
if not _project or _project == __name__:
    raise RuntimeError("Set DURABLE_DRILL_SETTINGS to your project's own settings module (for example "
                       "host.settings): durable.tools.drill_settings adds the drill's settings to it.")
_settings = globals()
_settings.update({name: value for name, value in vars(import_module(_project)).items() if name.isupper()})

if "durable.tools" not in _settings["INSTALLED_APPS"]:
    _settings["INSTALLED_APPS"] = [*_settings["INSTALLED_APPS"], "durable.tools"]

for _name, _value in json.loads(os.environ.get("DURABLE_DRILL_OVERRIDES") or "{}").items():
    if _name == "DATABASES":  # the connection to use, on top of the project's own options
        _value = {**_settings["DATABASES"], "default": {**_settings["DATABASES"]["default"], **_value["default"]}}
    _settings[_name] = _value
