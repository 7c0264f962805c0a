# -*- coding: utf-8 -*-
"""The collection claims exactly the ansible-core minors CI tests.

meta/runtime.yml's requires_ansible and the roles' min_ansible_version say which ansible-core releases the collection
supports; the test suite runs on the ansible-core requirements.txt pins. A claim wider than the tested minors would be
an untested promise, a narrower one would refuse a tested release.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def tested_minors() -> set:
    pins = [line.split("==", 1)[1].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.startswith("ansible-core==")]
    return {Version(pin).release[:2] for pin in pins}


def claimed_minors(spec: str) -> set:
    """The 2.x minors a requires_ansible specifier admits (any patch release of the minor)."""
    admitted = SpecifierSet(spec)
    return {(2, minor) for minor in range(0, 40)
            if any(Version("2.%d.%d" % (minor, patch)) in admitted for patch in range(0, 100))}


def test_claimed_minors_helper():
    assert claimed_minors(">=2.18.0,<2.20.0") == {(2, 18), (2, 19)}
    assert claimed_minors(">=2.19.3") >= {(2, 19), (2, 39)}
    assert claimed_minors("==2.19.*") == {(2, 19)}


def test_requires_ansible_is_what_ci_tests():
    spec = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert claimed_minors(spec) == tested_minors(), (spec, sorted(tested_minors()))


def test_roles_claim_the_lowest_tested_minor():
    lowest = "%d.%d" % min(tested_minors())
    for meta in sorted((ROOT / "roles").glob("*/meta/main.yml")):
        info = yaml.safe_load(meta.read_text()).get("galaxy_info") or {}
        if "min_ansible_version" in info:
            assert str(info["min_ansible_version"]) == lowest, meta
