# -*- coding: utf-8 -*-
"""Helpers the default scenario's tests share: run a playbook of the checkout against the simulated cluster, read
the recap. Not a test module (pytest collects test_*.py only)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))


def play(*args, timeout=900):
    """ansible-playbook from the checkout with the sim inventory; returns (rc, output)."""
    proc = subprocess.run(["ansible-playbook", "-i", "inventories/sim", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)
    return proc.returncode, proc.stdout + proc.stderr


def recap_changed(out):
    """{host: changed count} of the play recap."""
    return {h: int(c) for h, c in re.findall(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)}
