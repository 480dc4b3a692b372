"""The Prometheus alerting rules durable ships, found in the installed package (not a checkout)."""
from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

RULES_DIR: Traversable = files("durable") / "prometheus"
RULES: Traversable = RULES_DIR / "durable-alerts.yml"  # `rule_files:` in prometheus.yml
RULE_TESTS: Traversable = RULES_DIR / "durable-alerts.test.yml"  # `promtool test rules` unit tests of RULES
