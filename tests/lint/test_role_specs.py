# -*- coding: utf-8 -*-
"""Every role documents its variables in meta/argument_specs.yml (prometheus.prometheus style).

Every role depends on roles/common (the values several roles share, and the topology fact a3). A role's
optional options are its own defaults/main.yml keys plus the shared ones it lists, each with the same
default as the file that ships it; required options are only per-host inventory values (business IP,
NIC), values a wrapper role passes with import_role/include_role vars, or the topology fact. No seed
value lives in inventories/a3: it is hosts.yml alone. Ansible validates these specs when a role starts,
so a drift here is a failure at deploy time.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES_DIR = ROOT / "roles"
INVENTORY = ROOT / "inventories" / "a3"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir())
SHARED = "common"
# roles/common's spec entry point: not main, which Ansible would check at every play as the roles' dependency;
# playbooks/groups.yml checks it once per run through tasks_from: validate.
SHARED_ENTRY = "validate"
# Roles whose defaults are visible to a role's tasks because it imports them (import_role).
IMPORTS = {"vllm_prefill": ("vllm",), "vllm_decode": ("vllm",), "vllm": ("supervise",), "yuanrong": ("supervise",)}
# Facts, not defaults: roles/common's task sets a3 once per host per run, before any role's spec check.
FACTS = {"a3"}
# roles/common's defaults derived from that fact: its own spec cannot carry them (Ansible templates a spec's
# defaults when it checks the role, before the role's task sets a3); the roles that read them do.
FROM_FACT = {"a3_self", "yuanrong_worker_address", "proxy_admin_url"}
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


def _visible_defaults(role: str) -> dict:
    """What a role's tasks see as defaults: its own, the roles it imports, then roles/common."""
    seen: dict = {}
    for name in (role,) + IMPORTS.get(role, ()) + (SHARED,):
        for key, value in _defaults(name).items():
            seen.setdefault(key, value)
    return seen


def _main_entry(role: str) -> str:
    return SHARED_ENTRY if role == SHARED else "main"


def _options(role: str, entry_point: str = "") -> dict:
    entry_point = entry_point or _main_entry(role)
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
        if _main_entry(role) not in _specs(role):
            problems.setdefault(role, []).append("argument_specs has no '%s' entry point" % _main_entry(role))
        if role == SHARED and "main" in _specs(role):
            problems.setdefault(role, []).append("a 'main' entry point is checked at every play that uses a role")
    assert not problems, "roles without complete meta:\n" + _report(problems)


def test_defaults_are_the_optional_options():
    problems = {}
    for role in ROLES:
        defaults = set(_defaults(role)) - (FROM_FACT if role == SHARED else set())
        visible = set(_visible_defaults(role))
        optional = {name for name, spec in _options(role).items() if not (spec or {}).get("required")}
        if defaults - optional:
            problems.setdefault(role, []).append(
                "in defaults/main.yml, not optional in argument_specs: %s" % ", ".join(sorted(defaults - optional)))
        if optional - visible:
            problems.setdefault(role, []).append(
                "optional in argument_specs, not a default of the role, what it imports or roles/common: %s"
                % ", ".join(sorted(optional - visible)))
    assert not problems, "defaults/main.yml and argument_specs (main) disagree:\n" + _report(problems)


def test_spec_defaults_equal_role_defaults():
    problems = {}
    for role in ROLES:
        defaults = _visible_defaults(role)
        for name, spec in _options(role).items():
            if name in defaults and "default" in (spec or {}) and spec["default"] != defaults[name]:
                problems.setdefault(role, []).append(
                    "%s: spec default %r != defaults/main.yml %r" % (name, spec["default"], defaults[name]))
    assert not problems, "argument_specs defaults differ from defaults/main.yml:\n" + _report(problems)


def test_a_value_is_shipped_once():
    common = set(_defaults(SHARED))
    problems = {}
    owners: dict = {}
    for role in ROLES:
        for name in _defaults(role):
            owners.setdefault(name, []).append(role)
        twice = sorted(set(_defaults(role)) & common) if role != SHARED else []
        if twice:
            problems.setdefault(role, []).append("redefines roles/common's %s" % ", ".join(twice))
    for name, roles in owners.items():
        if len(roles) > 1:
            problems.setdefault(roles[0], []).append("%s is a default of %s" % (name, ", ".join(roles)))
    assert not problems, "defaults written more than once:\n" + _report(problems)


def test_inventory_is_hosts_alone():
    assert not (INVENTORY / "group_vars").exists(), "inventories/a3 carries group_vars: seed values belong in the roles"
    assert sorted(p.name for p in INVENTORY.iterdir() if p.suffix in (".yml", ".yaml")) == ["hosts.yml"]


def test_required_options_are_defined_by_the_inventory():
    inventory = _inventory_vars()
    passed = _vars_passed_by_wrappers()
    problems = {}
    for role in ROLES:
        visible = _visible_defaults(role)
        for entry_point, spec in _specs(role).items():
            for name, option in ((spec or {}).get("options") or {}).items():
                if (option or {}).get("required") and name not in inventory | passed.get(role, set()) | FACTS:
                    problems.setdefault(role, []).append(
                        "%s (entry point %s) is required but neither inventories/a3/hosts.yml, a wrapper role nor "
                        "roles/common's fact defines it" % (name, entry_point))
                if (option or {}).get("required") and name in visible:
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
            # common's spec is checked once per run, at its entry point validate: like its main, its names (the
            # shared values for a play that does not run the role) has no spec of its own
            if role == "common" and entry_point == "names":
                continue
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
    deps = [d.get("role") if isinstance(d, dict) else d for d in meta.get("dependencies") or []]
    want = [] if role == SHARED else [SHARED]
    assert deps == want, "%s: meta/main.yml dependencies must be %s (the shared values), got %s" % (role, want, deps)
