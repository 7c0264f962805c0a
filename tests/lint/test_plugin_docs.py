# -*- coding: utf-8 -*-
"""Every module and filter of the collection documents itself readably through ansible-doc (with the
doc fragments resolved): DOCUMENTATION, EXAMPLES and RETURN, and for modules the attributes block
(check mode support) the issue asks for. ansible-doc --json is what ansible-doc prints from; the text
rendering (what a user reads, ansible-doc -t module NAME) and every role's entry points
(ansible-doc -t role NAME) must succeed as well: a description line that YAML reads as a mapping passes
--json but makes the text rendering fail."""
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
ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))


def ansible_doc(args: list[str]) -> str:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_PAGER="cat",
               PAGER="cat")
    proc = subprocess.run([str(ANSIBLE_DOC)] + args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    return proc.stdout


def doc(kind: str, names: list[str]) -> dict:
    return json.loads(ansible_doc(["--json", "-t", kind] + ["ascend.vllm_pd." + n for n in names]))


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


def text_docs(kind: str, names: list[str]) -> dict:
    """One ansible-doc call for all names (it fails if any one fails), split at each plugin's heading."""
    if not ANSIBLE_DOC.exists():
        pytest.skip("ansible-doc not beside this python (run ./setup.sh)")
    heading = {"module": "> MODULE ", "role": "> ROLE: *"}[kind]
    text = ansible_doc(["-t", kind] + ["ascend.vllm_pd." + n for n in names])
    parts = [heading + part for part in text.split(heading)[1:]]
    return {part[len(heading):].split()[0].strip("*").split(".")[-1]: part for part in parts}


@pytest.fixture(scope="module")
def module_texts():
    return text_docs("module", MODULES)


@pytest.fixture(scope="module")
def role_texts():
    return text_docs("role", ROLES)


@pytest.mark.parametrize("name", MODULES)
def test_module_doc_renders_as_text(module_texts, name):
    """What a user reads: the text rendering, which fails where --json does not (a mapping as a line)."""
    text = module_texts[name]
    for heading in ("OPTIONS", "ATTRIBUTES:", "AUTHOR:", "EXAMPLES:", "RETURN VALUES:"):
        assert "\n" + heading in text, heading


@pytest.mark.parametrize("name", ROLES)
def test_role_doc_renders_as_text(role_texts, name):
    # roles/common's spec is the entry point validate (checked once per run by playbooks/groups.yml).
    entry = "validate" if name == "common" else "main"
    assert "ENTRY POINT: *%s*" % entry in role_texts[name], role_texts[name][:300]
