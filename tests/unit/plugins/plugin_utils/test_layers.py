# -*- coding: utf-8 -*-
"""The controller modules of the inventory: imports run one way, validation -> topology -> inventory (-> specs,
defaults), and no function is longer than a screen."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGIN_UTILS = Path(__file__).resolve().parents[4] / "plugins" / "plugin_utils"
VALIDATION = sorted((PLUGIN_UTILS / "_validation").glob("*.py"))
LAYERED = [PLUGIN_UTILS / name for name in ("_defaults.py", "_specs.py", "_inventory.py", "_topology.py")] + VALIDATION
# What each module may not import (a module of plugin_utils, by name).
FORBIDDEN = {
    "_defaults.py": {"_specs", "_inventory", "_topology", "_validation"},
    "_specs.py": {"_inventory", "_topology", "_validation"},
    "_inventory.py": {"_topology", "_validation"},
    "_topology.py": {"_validation"},
}
LONGEST = 60


def _imported(path: Path) -> set:
    """The plugin_utils modules a file imports (its first name under plugin_utils)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + ["%s.%s" % (node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if "plugin_utils." in name:
                found.add(name.split("plugin_utils.", 1)[1].split(".")[0])
    return found


@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_imports_run_one_way(name):
    wrong = _imported(PLUGIN_UTILS / name) & FORBIDDEN[name]
    assert not wrong, "%s imports %s: imports run validation -> topology -> inventory" % (name, sorted(wrong))


def test_no_plugin_utils_module_imports_ansible():
    for path in LAYERED:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "ansible" for a in node.names), path
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "ansible", path


@pytest.mark.parametrize("path", LAYERED, ids=lambda p: p.relative_to(PLUGIN_UTILS).as_posix())
def test_no_function_is_longer_than_a_screen(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = ["%s (%d lines)" % (node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= LONGEST]
    assert not long, "%s: split %s" % (path.name, ", ".join(long))
