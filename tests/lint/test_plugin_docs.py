# -*- coding: utf-8 -*-
"""Every module and filter of the collection documents itself readably through ansible-doc (with the
doc fragments resolved): DOCUMENTATION, EXAMPLES and RETURN, and for modules the attributes block
(check mode support) the issue asks for. ansible-doc --json is what ansible-doc prints from; the text
rendering (what a user reads, ansible-doc -t module NAME) and every role's entry points
(ansible-doc -t role NAME) must succeed as well: a description line that YAML reads as a mapping passes
--json but makes the text rendering fail.

Every filter has a doc of its own: ansible-doc shows a Python file's DOCUMENTATION for every filter that file
provides, so a file with several filters documents each in plugins/filter/<name>.yml and carries none itself.
The doc's options are the filter function's parameters (names, order, required, defaults). Every module and
filter says when it was added: the collection's first release, 1.0.0, for what it shipped with, and never a
version above the collection's next minor release (galaxy.yml's version with its minor raised: what is added
after a release ships in the next minor)."""
from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.stem.startswith("_"))
ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
# The release every plugin that exists now was added in: nothing was released before it.
FIRST_RELEASE = "1.0.0"


def _filter_functions() -> dict:
    """{filter name: (python file stem, function)} of every filter the collection exports, read from the plugins
    themselves (what a playbook can call), not from ansible-doc."""
    found = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module("ansible_collections.ascend.vllm_pd.plugins.filter." + path.stem)
        for name, func in module.FilterModule().filters().items():
            assert name not in found, "filter %s is provided by %s and %s" % (name, found[name][0], path.stem)
            found[name] = (path.stem, func)
    return found


FILTERS = _filter_functions()


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
    heading = {"module": "> MODULE ", "role": "> ROLE: *", "filter": "> FILTER "}[kind]
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


# --- filters: one doc each ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def filter_docs():
    if not ANSIBLE_DOC.exists():
        pytest.skip("ansible-doc not beside this python (run ./setup.sh)")
    return doc("filter", sorted(FILTERS))


def test_ansible_doc_lists_every_filter_documented():
    """ansible-doc -l lists what the plugins export, each with a doc (UNDOCUMENTED otherwise)."""
    if not ANSIBLE_DOC.exists():
        pytest.skip("ansible-doc not beside this python (run ./setup.sh)")
    listed = json.loads(ansible_doc(["--json", "-l", "-t", "filter", "ascend.vllm_pd"]))
    assert sorted(listed) == sorted("ascend.vllm_pd." + n for n in FILTERS)
    assert [n for n, short in listed.items() if short == "UNDOCUMENTED"] == []


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_has_its_own_doc(filter_docs, name):
    """The doc ansible-doc shows for a filter is that filter's, not a sibling's of the same Python file."""
    entry = filter_docs["ascend.vllm_pd." + name]
    documentation = entry["doc"]
    assert documentation["name"] == name, "ansible-doc shows %s's doc for %s" % (documentation["name"], name)
    # plugins/filter/<name>.yml, or the Python file when it is named after its only filter
    stem = FILTERS[name][0]
    alone = stem == name and [s for s, _func in FILTERS.values()].count(stem) == 1
    assert Path(documentation["filename"]).name in ((name + ".yml", name + ".py") if alone else (name + ".yml",))
    assert documentation["short_description"] and documentation["description"]
    assert "ascend.vllm_pd." + name in entry["examples"], "EXAMPLES must call the filter by its full name"
    assert entry["return"]["_value"]["description"] and entry["return"]["_value"]["type"]


def test_a_file_with_several_filters_carries_no_doc_of_its_own():
    """ansible-doc would show it for every filter of the file."""
    stems = [stem for stem, _func in FILTERS.values()]
    for stem in sorted(set(stems)):
        if stems.count(stem) > 1:
            text = (ROOT / "plugins" / "filter" / (stem + ".py")).read_text(encoding="utf-8")
            assert not re.search(r"^(DOCUMENTATION|EXAMPLES|RETURN) *=", text, re.M), stem


def _parameters(func) -> list:
    """[(name, required, default)] of a filter function's parameters after its input; a default of None is no
    default (the doc leaves it out), a tuple default reads as the list the doc shows."""
    out = []
    for param in list(inspect.signature(func).parameters.values())[1:]:
        required = param.default is inspect.Parameter.empty
        default = None if required else param.default
        out.append((param.name, required, list(default) if isinstance(default, tuple) else default))
    return out


def _written_options(filename: str) -> dict:
    """The options of a doc as its file writes them, in their order (ansible-doc --json sorts them)."""
    path = Path(filename)
    if path.suffix == ".py":
        module = importlib.import_module("ansible_collections.ascend.vllm_pd.plugins.filter." + path.stem)
        documentation = yaml.safe_load(module.DOCUMENTATION)
    else:
        with path.open(encoding="utf-8") as handle:
            documentation = yaml.safe_load(handle)["DOCUMENTATION"]
    return dict(documentation.get("options") or {})


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_options_are_its_parameters(filter_docs, name):
    """Names (a keyword call uses them), order (a positional call), required and defaults, as the code has them."""
    options = _written_options(filter_docs["ascend.vllm_pd." + name]["doc"]["filename"])
    assert options.pop("_input", {}).get("required"), "the filter's input (_input) must be documented as required"
    documented = [(option, bool(spec.get("required")), spec.get("default")) for option, spec in options.items()]
    assert documented == _parameters(FILTERS[name][1])


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_doc_renders_as_text(filter_texts, name):
    text = filter_texts[name]
    for heading in ("OPTIONS", "EXAMPLES:", "RETURN VALUES:"):
        assert "\n" + heading in text, heading


@pytest.fixture(scope="module")
def filter_texts():
    return text_docs("filter", sorted(FILTERS))


# --- version_added ------------------------------------------------------------------------------------------------


def _version(text) -> tuple:
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)$", str(text))
    assert match, "%r is not a collection version X.Y.Z" % (text,)
    return tuple(int(part) for part in match.groups())


def _collection_version() -> tuple:
    with (ROOT / "galaxy.yml").open(encoding="utf-8") as handle:
        return _version(yaml.safe_load(handle)["version"])


def _check_version_added(documentation, what):
    added = documentation.get("version_added")
    assert added, "%s has no version_added" % what
    assert documentation.get("version_added_collection") == "ascend.vllm_pd", what
    first = _version(FIRST_RELEASE)
    # what exists at the first release was added in it; anything later in a release up to the next minor
    major, minor, _patch = _collection_version()
    assert _version(added) == first or first < _version(added) <= (major, minor + 1, 0), \
        "%s: version_added %s, but the collection's first release is %s and galaxy.yml says %s (the next minor: " \
        "%d.%d.0)" % (what, added, FIRST_RELEASE, ".".join(str(n) for n in _collection_version()), major, minor + 1)


@pytest.mark.parametrize("name", MODULES)
def test_module_says_when_it_was_added(module_docs, name):
    _check_version_added(module_docs["ascend.vllm_pd." + name]["doc"], "module " + name)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_says_when_it_was_added(filter_docs, name):
    _check_version_added(filter_docs["ascend.vllm_pd." + name]["doc"], "filter " + name)


# --- role options whose default a spec cannot carry ---------------------------------------------------------------


def _shipped_defaults() -> dict:
    out = {}
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        with path.open(encoding="utf-8") as handle:
            out.update(yaml.safe_load(handle) or {})
    return out


def test_a_role_option_without_a_spec_default_says_its_default():
    """The docs' schema (antsibull-docs lint-collection-docs) refuses a Jinja expression as the default of a dict,
    list, int or bool option, so such an option's spec carries no default: key; its description says what it
    defaults to (a sentence starting with Default), or the role docs would show an option without one."""
    shipped, problems = _shipped_defaults(), []
    for role in ROLES:
        with (ROOT / "roles" / role / "meta" / "argument_specs.yml").open(encoding="utf-8") as handle:
            entry_points = yaml.safe_load(handle)["argument_specs"]
        for entry, body in entry_points.items():
            for name, spec in ((body or {}).get("options") or {}).items():
                if "default" in spec or name not in shipped:
                    continue
                items = spec.get("description")
                items = items if isinstance(items, list) else [items]
                sentences = [part.strip() for item in items for part in re.split(r"(?<=[.!?])\s+", str(item))]
                if not any(sentence.startswith("Default") for sentence in sentences):
                    problems.append("roles/%s (%s): %s" % (role, entry, name))
    assert not problems, "options shipped with a default their docs do not state:\n" + "\n".join(problems)
