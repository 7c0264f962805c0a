# -*- coding: utf-8 -*-
"""The rolling scenario's extra vars files, read from molecule.yml's CONVERGE_ARGS (one list for the converge and
for every playbook the tests run), and the command that runs a playbook with them as an operator does."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
VAULT_PASSWORD_FILE = ROOT / "molecule/rolling/vault-pass.txt"
_ARGS = yaml.safe_load((ROOT / "molecule/rolling/molecule.yml").read_text())["provisioner"]["env"]["CONVERGE_ARGS"]
VARS_FILES = tuple(re.findall(r"@(\S+\.yml)", _ARGS))
assert VARS_FILES, "no vars file in molecule/rolling/molecule.yml's CONVERGE_ARGS"


def playbook(name, *args, timeout=1800):
    """ansible-playbook NAME (a path under the checkout) with the scenario's vars files and the checkout's
    ansible.cfg, as an operator runs it (molecule points ANSIBLE_CONFIG at its own, whose callback prints results as
    JSON); .stdout holds stdout and stderr."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_VAULT_PASSWORD_FILE=str(VAULT_PASSWORD_FILE))
    extra = [a for path in VARS_FILES for a in ("-e", "@" + path)]
    return subprocess.run(["ansible-playbook", name, "-i", "inventories/sim", *extra, *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          check=False, stdin=subprocess.DEVNULL, env=env)
