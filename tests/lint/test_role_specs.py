# -*- coding: utf-8 -*-
"""Every role documents its variables in meta/argument_specs.yml (prometheus.prometheus style).

Optional options are exactly the keys of defaults/main.yml (with the same default where the spec
gives one); required options are inventory values (inventories/a3) or values a wrapper role passes
with import_role/include_role vars. Ansible validates these specs when a role starts, so a drift
here is a failure at deploy time.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES_DIR = ROOT / "roles"
INVENTORY = ROOT / "inventories" / "a3"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir())
# Task files that are entry points of their own (include_role/import_role tasks_from: <name>).
EXTRA_ENTRY_POINTS = ("render", "stop", "names")


def _load(path: Path):
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _defaults(role: str) -> dict:
    path = ROLES_DIR / role / "defaults" / "main.yml"
    return (_load(path) or {}) if path.is_file() else {}


def _specs(role: str) -> dict:
    path = ROLES_DIR / role / "meta" / "argument_specs.yml"
    if not path.is_file():
        return {}
    return (_load(path) or {}).get("argument_specs") or {}


def _options(role: str, entry_point: str = "main") -> dict:
    return (_specs(role).get(entry_point) or {}).get("options") or {}


def _host_vars(group: dict, found: set) -> None:
    """Variables of an inventory group, its hosts and children (YAML inventory layout)."""
    if not isinstance(group, dict):
        return
    found.update((group.get("vars") or {}).keys())
    for host_vars in (group.get("hosts") or {}).values():
        found.update((host_vars or {}).keys())
    for child in (group.get("children") or {}).values():
        _host_vars(child, found)


def _inventory_vars() -> set:
    found = set()
    for path in sorted((INVENTORY / "group_vars" / "all").glob("*.yml")):
        found.update((_load(path) or {}).keys())
    for group in (_load(INVENTORY / "hosts.yml") or {}).values():
        _host_vars(group, found)
    return found


def _tasks(data):
    """Every task of a task file, blocks included."""
    for task in data or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _vars_passed_by_wrappers() -> dict:
    """{role: variables another role passes to it through import_role/include_role vars}."""
    passed: dict = {}
    for path in sorted(ROLES_DIR.glob("*/tasks/*.yml")):
        try:
            data = _load(path)
        except yaml.YAMLError:  # reported by yamllint / ansible-lint, not here
            continue
        for task in _tasks(data):
            for action in ("import_role", "include_role"):
                args = task.get("ansible.builtin." + action, task.get(action))
                if isinstance(args, dict) and args.get("name"):
                    role = str(args["name"]).rsplit(".", 1)[-1]
                    passed.setdefault(role, set()).update((task.get("vars") or {}).keys())
    return passed


def _report(problems: dict) -> str:
    return "\n".join("%s: %s" % (role, "; ".join(msgs)) for role, msgs in sorted(problems.items()))


def test_every_role_has_meta():
    problems = {}
    for role in ROLES:
        for name in ("main.yml", "argument_specs.yml"):
            if not (ROLES_DIR / role / "meta" / name).is_file():
                problems.setdefault(role, []).append("meta/%s is missing" % name)
        if "main" not in _specs(role):
            problems.setdefault(role, []).append("argument_specs has no 'main' entry point")
    assert not problems, "roles without complete meta:\n" + _report(problems)


def test_defaults_are_the_optional_options():
    problems = {}
    for role in ROLES:
        defaults = set(_defaults(role))
        optional = {name for name, spec in _options(role).items() if not (spec or {}).get("required")}
        if defaults - optional:
            problems.setdefault(role, []).append(
                "in defaults/main.yml, not optional in argument_specs: %s" % ", ".join(sorted(defaults - optional)))
        if optional - defaults:
            problems.setdefault(role, []).append(
                "optional in argument_specs, not in defaults/main.yml: %s" % ", ".join(sorted(optional - defaults)))
    assert not problems, "defaults/main.yml and argument_specs (main) disagree:\n" + _report(problems)


def test_spec_defaults_equal_role_defaults():
    problems = {}
    for role in ROLES:
        defaults = _defaults(role)
        for name, spec in _options(role).items():
            if name in defaults and "default" in (spec or {}) and spec["default"] != defaults[name]:
                problems.setdefault(role, []).append(
                    "%s: spec default %r != defaults/main.yml %r" % (name, spec["default"], defaults[name]))
    assert not problems, "argument_specs defaults differ from defaults/main.yml:\n" + _report(problems)


def test_required_options_are_defined_by_the_inventory():
    inventory = _inventory_vars()
    passed = _vars_passed_by_wrappers()
    problems = {}
    for role in ROLES:
        for entry_point, spec in _specs(role).items():
            for name, option in ((spec or {}).get("options") or {}).items():
                if (option or {}).get("required") and name not in inventory | passed.get(role, set()):
                    problems.setdefault(role, []).append(
                        "%s (entry point %s) is required but neither inventories/a3 nor a wrapper role defines it"
                        % (name, entry_point))
                if (option or {}).get("required") and name in _defaults(role):
                    problems.setdefault(role, []).append("%s is required but has a role default" % name)
    assert not problems, "required options that would fail role validation:\n" + _report(problems)


def _undescribed(options: dict, prefix: str = "") -> list:
    missing = []
    for name, option in (options or {}).items():
        description = (option or {}).get("description")
        if isinstance(description, list):
            description = " ".join(str(line) for line in description)
        if not description or not str(description).strip():
            missing.append(prefix + name)
        missing += _undescribed((option or {}).get("options"), prefix + name + ".")
    return missing


def test_every_option_has_a_description():
    problems = {}
    for role in ROLES:
        for entry_point, spec in _specs(role).items():
            missing = _undescribed((spec or {}).get("options"))
            if missing:
                problems.setdefault(role, []).append("%s: %s" % (entry_point, ", ".join(missing)))
            if not (spec or {}).get("short_description"):
                problems.setdefault(role, []).append("%s: no short_description" % entry_point)
    assert not problems, "options without a description:\n" + _report(problems)


def test_entry_points_follow_the_task_files():
    problems = {}
    for role in ROLES:
        specs = _specs(role)
        for entry_point in EXTRA_ENTRY_POINTS:
            has_tasks = (ROLES_DIR / role / "tasks" / (entry_point + ".yml")).is_file()
            if has_tasks and entry_point not in specs:
                problems.setdefault(role, []).append("tasks/%s.yml has no entry point" % entry_point)
            elif has_tasks and _options(role, entry_point) != _options(role):
                problems.setdefault(role, []).append("entry point %s has other options than main" % entry_point)
        for entry_point in set(specs) - {"main"}:
            if not (ROLES_DIR / role / "tasks" / (entry_point + ".yml")).is_file():
                problems.setdefault(role, []).append("entry point %s has no tasks/%s.yml" % (entry_point, entry_point))
    assert not problems, "argument_specs entry points and task files disagree:\n" + _report(problems)


@pytest.mark.parametrize("role", ROLES)
def test_meta_main_is_galaxy_info(role):
    meta = _load(ROLES_DIR / role / "meta" / "main.yml") or {}
    info = meta.get("galaxy_info") or {}
    for key in ("author", "description", "license", "min_ansible_version"):
        assert info.get(key), "%s: meta/main.yml galaxy_info.%s is missing" % (role, key)
    assert meta.get("dependencies") == [], "%s: meta/main.yml dependencies must be []" % role
