# -*- coding: utf-8 -*-
"""The alert rules of the role monitoring, as the render of inventories/a3 writes them (tests/golden/a3: role
defaults, 2 prefill + 2 decode ranks): promtool accepts them, and promtool's unit tests (rules_test.yml) make
every alert fire where it should and stay silent where it should not. promtool is a requirement of these tests
(Debian/Ubuntu: apt-get install prometheus); a missing promtool fails them."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RULES = ROOT / "tests/golden/a3/p0/etc/prometheus/file_sd/ascend-vllm-pd/ascend-vllm-pd.rules.yml"
TESTS = HERE / "rules_test.yml"


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (Debian/Ubuntu), then rerun"
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The rules file and the tests side by side (rules_test.yml names the rules file relative to itself)."""
    work = tmp_path_factory.mktemp("rules")
    shutil.copy(RULES, work / RULES.name)
    shutil.copy(TESTS, work / TESTS.name)
    return work


def run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def alerts():
    return [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_checks_the_rules(promtool, workdir):
    proc = run([promtool, "check", "rules", RULES.name], workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests_pass(promtool, workdir):
    proc = run([promtool, "test", "rules", TESTS.name], workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_has_a_firing_and_a_silent_case():
    fire, silent = {}, {}
    for case in yaml.safe_load(TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test") or []:
            target = fire if check.get("exp_alerts") else silent
            target[check["alertname"]] = target.get(check["alertname"], 0) + 1
    names = alerts()
    assert len(names) == len(set(names)) and len(names) >= 10
    assert [n for n in names if n not in fire] == [], "alerts without a test that fires them"
    assert [n for n in names if n not in silent] == [], "alerts without a test where they stay silent"
    assert set(fire) | set(silent) <= set(names), "tests of alerts the rules do not have"


def test_every_alert_has_a_runbook_summary_and_severity():
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            for key in ("summary", "description", "runbook"):
                assert rule["annotations"].get(key, "").strip(), (rule["alert"], key)


def test_the_dp_group_rule_carries_each_sides_size():
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r.get("alert") == "A3DPGroupIncomplete")
    assert 'side="prefill"}) < 2' in rule["expr"] and 'side="decode"}) < 2' in rule["expr"]
