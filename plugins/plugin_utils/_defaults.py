# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's role defaults, read on the controller.

Ansible's hostvars hold what the inventory (and -e, and facts) set for a host, not role defaults: a
role default is only visible to tasks of that role. The topology filter and the validate action read
every prefill/decode host at once, so for a variable a host does not set they fall back to the
default that the role using it ships. Every role's defaults/main.yml is read here once per process.
"""
from __future__ import annotations

import functools
import os

import yaml

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
# The shared values come first; a role may not redefine one of them (tests/lint/test_role_specs.py).
FIRST = "common"


@functools.lru_cache(maxsize=None)
def _load(roles_dir: str) -> dict:
    merged: dict = {}
    names = sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else []
    for name in [FIRST] + [n for n in names if n != FIRST]:
        path = os.path.join(roles_dir, name, "defaults", "main.yml")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
        for key, value in data.items():
            merged.setdefault(str(key), value)
    return merged


def role_defaults(roles_dir: str = ROLES_DIR) -> dict:
    """{variable: default as written in defaults/main.yml} for every role of the collection (a copy)."""
    return dict(_load(roles_dir))
