"""The shipped Prometheus alerting rules: valid, unit-tested with promtool, and about metrics durable exports.

promtool comes from Debian's `prometheus` package (.ci/run installs it); without it these
tests fail rather than skip, so a machine that cannot check the rules never passes them.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command

from durable import alert_rules, metrics
from durable.exposition import DatabaseGauges

RULES_DIR = Path(str(alert_rules.RULES_DIR))
RULES = Path(str(alert_rules.RULES))
RULE_TESTS = Path(str(alert_rules.RULE_TESTS))


def promtool(*args: str) -> subprocess.CompletedProcess:
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (Debian's package ships /usr/bin/promtool)"
    return subprocess.run([path, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120)


def test_promtool_accepts_the_rules():
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 9 rules found" in checked.stdout


def test_each_alert_fires_on_its_rising_series_in_promtools_unit_tests():
    tested = promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def alerts() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def test_the_alerts_the_runbook_promises_are_there():
    assert {"DurableSideEffectUnknown", "DurableRetriesExhausted", "DurableVersionMismatch",
            "DurableApprovalStuck", "DurableApprovalNearExpiry", "DurableWaitOverdue", "DurableRunOverBudget"} <= set(alerts())


@pytest.mark.django_db
def test_every_alert_reads_a_metric_that_durable_exports():
    counted = {family._name + ("_total" if family._type == "counter" else "") for family in
               (*metrics.PER_WORKFLOW, *metrics.PER_ACTION, metrics.VERSION_MISMATCHES, metrics.RECONCILIATIONS,
                metrics.LLM_TOKENS, metrics.LLM_COST, metrics.LLM_UNPRICED_TOKENS)}
    gauged = {family.name for family in DatabaseGauges().collect()} | {"approval_next_expiry_seconds"}
    every_test_alert = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    for alert, expr in alerts().items():
        used = set(re.findall(r"\b([a-z_]+_(?:total|seconds|operations))\b", expr))
        assert used and used <= counted | gauged, (alert, used - counted - gauged)
        assert alert in every_test_alert, f"{alert} has no promtool unit test"


def test_deploy_prometheus_is_the_packaged_rules():
    # deploy/prometheus/ is a link to the rules the wheel carries, so the two can never differ.
    deploy = Path(settings.BASE_DIR) / "deploy" / "prometheus"
    assert deploy.resolve() == RULES_DIR.resolve()


def test_the_alert_rules_command_writes_the_rules_and_their_tests(tmp_path, capsys):
    call_command("durable_alert_rules")
    assert capsys.readouterr().out == RULES.read_text()
    call_command("durable_alert_rules", "--out", str(tmp_path))
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        RULES.name: RULES.read_text(), RULE_TESTS.name: RULE_TESTS.read_text()}
    tested = promtool("test", "rules", str(tmp_path / RULE_TESTS.name))
    assert tested.returncode == 0, tested.stdout + tested.stderr
