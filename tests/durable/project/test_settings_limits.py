"""The standalone project's named limits: the DURABLE_LIMITS environment variable, as JSON."""
import pytest

from durable.conf import SETTINGS
from durable.project import settings as project_settings


def test_the_environment_gives_the_limits_as_json():
    found = project_settings._from_environment(SETTINGS, {"DURABLE_LIMITS": '{"openai": {"concurrency": 50, '
                                                                            '"rate": "500/m", "per": null}}'})
    assert found == {"DURABLE_LIMITS": {"openai": {"concurrency": 50, "rate": "500/m", "per": None}}}
    with pytest.raises(RuntimeError, match="DURABLE_LIMITS"):
        project_settings._from_environment(SETTINGS, {"DURABLE_LIMITS": "openai=50"})
