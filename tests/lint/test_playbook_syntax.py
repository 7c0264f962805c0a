# -*- coding: utf-8 -*-
"""Every playbook passes `ansible-playbook --syntax-check`, with the a3 inventory and with no inventory at all.

Galaxy's importer checks the syntax without an inventory: a play keyword such as `serial:` that indexes a group
(groups['decode']) fails there although it works with one, so both cases are checked.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PLAYBOOKS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "playbooks").glob("*.yml")) + ["site.yml"]


@pytest.mark.parametrize("inventory", ["inventories/a3", "localhost,"], ids=["a3", "no-inventory"])
def test_syntax(inventory):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    failed = {}
    for playbook in PLAYBOOKS:
        proc = subprocess.run([str(PLAYBOOK), "--syntax-check", "-i", inventory, playbook], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            failed[playbook] = (proc.stdout + proc.stderr).strip()[-600:]
    assert not failed, failed


def test_every_playbook_is_checked():
    assert len(PLAYBOOKS) > 10 and "playbooks/site.yml" in PLAYBOOKS and "playbooks/rolling_restart.yml" in PLAYBOOKS
