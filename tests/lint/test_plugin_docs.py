# -*- coding: utf-8 -*-
"""Every module and filter of the collection documents itself readably through ansible-doc (with the
doc fragments resolved): DOCUMENTATION, EXAMPLES and RETURN, and for modules the attributes block
(check mode support) the issue asks for. ansible-doc --json is what ansible-doc prints from."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.stem.startswith("_"))


def doc(kind: str, names: list[str]) -> dict:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    proc = subprocess.run([str(ANSIBLE_DOC), "--json", "-t", kind] + ["ascend.vllm_pd." + n for n in names],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def module_docs():
    if not ANSIBLE_DOC.exists():
        pytest.skip("ansible-doc not beside this python (run ./setup.sh)")
    return doc("module", MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_documented(module_docs, name):
    entry = module_docs["ascend.vllm_pd." + name]
    documentation = entry["doc"]
    assert documentation["short_description"] and documentation["description"]
    assert documentation["attributes"]["check_mode"]["support"] in ("full", "partial")
    assert entry["examples"].strip() and entry["return"], "EXAMPLES and RETURN must be filled"


def test_read_only_modules_share_the_fragment(module_docs):
    for name in ("hccn_check", "npu_smi_info"):
        attributes = module_docs["ascend.vllm_pd." + name]["doc"]["attributes"]
        assert attributes["idempotent"]["support"] == "full"
        assert "only reads" in attributes["idempotent"]["description"]
    assert module_docs["ascend.vllm_pd.npu_smi_info"]["doc"]["attributes"]["facts"]["support"] == "full"
