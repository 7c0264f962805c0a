# -*- coding: utf-8 -*-
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


from helpers import ROOT, venv_bin


def render(inventory: str, out: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([venv_bin("ansible-playbook"), "playbooks/render.yml", "-i", inventory,
                           "-e", "render_dir=%s" % out], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, "render of %s failed:\n%s\n%s" % (inventory, proc.stdout[-4000:], proc.stderr[-2000:])
    return proc


@pytest.fixture(scope="session")
def rendered_a3(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("render-a3")
    render("inventories/a3", out)
    return out


@pytest.fixture(scope="session")
def seed():
    """The seed's values (tests/golden/seed_values.yml)."""
    from golden.seed import Seed
    return Seed()
