# -*- coding: utf-8 -*-
"""Every role documents its variables in meta/argument_specs.yml (prometheus.prometheus style), and the specs are
the one declaration of every option.

Each option is declared once, in the spec of the role that owns it: the role whose defaults/main.yml ships it (the
shared values in roles/common's entry point validate, with the inventory's per-host values and the topology fact),
or, for a value without default, the role that reads it. A role's entry points share their own options through
YAML anchors. Every option a role reads (in its defaults, tasks, handlers, vars or templates) is declared in its
own spec, in roles/common's or in the spec of a role it imports, with the same default as the file that ships it.
The playbook validation derives its per-option checks from these declarations (plugins/plugin_utils/_specs.py),
including the constraint sentences of the descriptions ("At least 1.", "An absolute path, not C(/).", ...); a
malformed one fails here. No seed value lives in inventories/a3: it is hosts.yml alone. Ansible validates these
specs when a role starts, so a drift here is a failure at deploy time.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs

ROOT = Path(__file__).resolve().parents[2]
ROLES_DIR = ROOT / "roles"
INVENTORY = ROOT / "inventories" / "a3"
ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir())
SHARED = "common"
# roles/common's spec entry point: not main, which Ansible would check at every play as the roles' dependency;
# playbooks/groups.yml checks it once per run through tasks_from: validate.
SHARED_ENTRY = "validate"
# Roles whose defaults (and options) are visible to a role's tasks because it imports them (import_role, or
# include_role with public: true); _imports() derives them from the task files and checks these are among them.
IMPORTS = {"vllm_prefill": ("vllm",), "vllm_decode": ("vllm",), "vllm": ("supervise",), "yuanrong": ("supervise",)}
# Facts, not defaults: roles/common's task sets a3 once per host per run, before any role's spec check.
FACTS = set(_specs.FACTS)
# roles/common's defaults derived from that fact: its own spec cannot carry them (Ansible templates what a spec names
# when it checks the role, before the role's task sets a3). Each is declared once, by one role that reads it; the
# other roles read it undeclared.
FROM_FACT = {"a3_self": "vllm", "yuanrong_worker_address": "yuanrong", "proxy_admin_url": "proxy"}
# Optional per-host inventory values without a default (inventories/a3/hosts.yml names them in its comment).
INVENTORY_ONLY = {"vllm_dp_address"}
# Task files that are entry points of their own (include_role/import_role tasks_from: <name>).
EXTRA_ENTRY_POINTS = ("render", "stop", "names")
# Keys whose string value is a Jinja expression as a whole (no braces).
_CONDITIONS = {"when", "failed_when", "changed_when", "until", "that"}
_JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")


def _load(path: Path):
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _defaults(role: str) -> dict:
    path = ROLES_DIR / role / "defaults" / "main.yml"
    return (_load(path) or {}) if path.is_file() else {}


def _specs_of(role: str) -> dict:
    path = ROLES_DIR / role / "meta" / "argument_specs.yml"
    if not path.is_file():
        return {}
    return (_load(path) or {}).get("argument_specs") or {}


def _main_entry(role: str) -> str:
    return SHARED_ENTRY if role == SHARED else "main"


def _options(role: str, entry_point: str = "") -> dict:
    entry_point = entry_point or _main_entry(role)
    return (_specs_of(role).get(entry_point) or {}).get("options") or {}


def _declared(role: str) -> dict:
    """Every option of every entry point of a role's spec."""
    out: dict = {}
    for spec in _specs_of(role).values():
        out.update((spec or {}).get("options") or {})
    return out


def _role_actions(task: dict):
    """(action, args) of a task's import_role/include_role."""
    for action in ("import_role", "include_role"):
        args = task.get("ansible.builtin." + action, task.get(action))
        if isinstance(args, dict) and args.get("name"):
            yield action, args


def _imports(role: str) -> tuple:
    """Roles whose options a role's tasks see: those it imports (import_role, or include_role with public:
    true), by name (a templated name counts as none)."""
    found = []
    for path in sorted((ROLES_DIR / role / "tasks").glob("*.yml")):
        for task in _tasks(_load(path)):
            for action, args in _role_actions(task):
                name = str(args["name"]).rsplit(".", 1)[-1]
                if "{" not in name and (action == "import_role" or args.get("public")) and name not in found:
                    found.append(name)
    return tuple(found)


def _visible(role: str) -> set:
    """The options a role's tasks may read: its own, those of the roles it imports, roles/common's."""
    names = set()
    for name in (role,) + _imports(role) + (SHARED,):
        names |= set(_declared(name))
    return names


def _owner_default(name: str):
    """(True, value) of the defaults/main.yml that ships an option, else (False, None)."""
    for role in [SHARED] + [r for r in ROLES if r != SHARED]:
        if name in _defaults(role):
            return True, _defaults(role)[name]
    return False, None


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
    """{role: variables a wrapper passes to it}: another role's or a playbook's import_role/include_role vars, and
    a play's vars for the roles it runs (roles: or a task of the play)."""
    passed: dict = {}
    paths = sorted(ROLES_DIR.glob("*/tasks/*.yml")) + sorted((ROOT / "playbooks").glob("**/*.yml"))
    for path in paths:
        try:
            data = _load(path)
        except yaml.YAMLError:  # reported by yamllint / ansible-lint, not here
            continue
        plays = [p for p in data or [] if isinstance(p, dict) and "hosts" in p]
        for play in plays or [{"tasks": data}]:
            play_vars = set((play.get("vars") or {}).keys())
            roles = [r.get("role") if isinstance(r, dict) else r for r in play.get("roles") or []]
            for role in roles:
                passed.setdefault(str(role).rsplit(".", 1)[-1], set()).update(play_vars)
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                for task in _tasks(play.get(key)):
                    for _action, args in _role_actions(task):
                        role = str(args["name"]).rsplit(".", 1)[-1]
                        passed.setdefault(role, set()).update(play_vars | set((task.get("vars") or {}).keys()))
    return passed


def _expressions(node, key=None):
    """The Jinja expressions of a YAML document: whole conditions, and every {{ }} / {% %} of the other strings."""
    if isinstance(node, dict):
        for sub_key, value in node.items():
            yield from _expressions(value, sub_key)
    elif isinstance(node, list):
        for value in node:
            yield from _expressions(value, key)
    elif isinstance(node, str):
        if key in _CONDITIONS:
            yield node
        for match in _JINJA.finditer(node):
            yield match.group(1) or match.group(2)


def _role_expressions(role: str):
    """(file, expression) of every Jinja expression of a role's defaults, tasks, handlers, vars and templates."""
    for sub in ("defaults", "tasks", "handlers", "vars", "templates"):
        for path in sorted((ROLES_DIR / role / sub).rglob("*")) if (ROLES_DIR / role / sub).is_dir() else []:
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if sub != "templates" and path.suffix in (".yml", ".yaml"):
                exprs = list(_expressions(yaml.safe_load(text)))
            else:
                exprs = [m.group(1) or m.group(2) for m in _JINJA.finditer(re.sub(r"\{#.*?#\}", "", text, flags=re.S))]
            for expr in exprs:
                yield path.relative_to(ROLES_DIR), expr


def _fallback_matches(expr: str, name: str) -> bool:
    """The expression reads name as 'name | default(<literal>)' whose literal is the shipped default."""
    match = re.search(r"(?<![\w.])%s\s*\|\s*default\(\s*(?:'([^']*)'|\"([^\"]*)\")\s*\)" % re.escape(name), expr)
    shipped, value = _owner_default(name)
    return bool(match) and shipped and (match.group(1) if match.group(1) is not None else match.group(2)) == value


def _report(problems: dict) -> str:
    return "\n".join("%s: %s" % (role, "; ".join(msgs)) for role, msgs in sorted(problems.items()))


def test_every_role_has_meta():
    problems = {}
    for role in ROLES:
        for name in ("main.yml", "argument_specs.yml"):
            if not (ROLES_DIR / role / "meta" / name).is_file():
                problems.setdefault(role, []).append("meta/%s is missing" % name)
        if _main_entry(role) not in _specs_of(role):
            problems.setdefault(role, []).append("argument_specs has no '%s' entry point" % _main_entry(role))
        if role == SHARED and "main" in _specs_of(role):
            problems.setdefault(role, []).append("a 'main' entry point is checked at every play that uses a role")
    assert not problems, "roles without complete meta:\n" + _report(problems)


def test_the_specs_are_the_one_declaration():
    """No option in two roles' specs, no key the role argument spec schema does not know (ansible-test sanity), no
    malformed or misplaced constraint sentence, no default that breaks its own constraints (_specs.problems)."""
    problems = _specs.problems(str(ROLES_DIR))
    assert not problems, "the specs as the one declaration of every option:\n" + "\n".join(problems)


def test_a_malformed_constraint_sentence_fails_the_lint(tmp_path):
    """The lint itself: a sentence that starts like a constraint but does not read as one is named."""
    meta = tmp_path / "common" / "meta"
    meta.mkdir(parents=True)
    options = {"x_port": {"type": "int", "default": 1, "description": "A port. At least one."},
               "x_dir": {"type": "str", "default": "/a", "description": ["A directory.", "Not C(/)."]},
               "x_flag": {"type": "bool", "default": True, "description": "A flag. At most 3."},
               "x_count": {"type": "int", "default": 0, "description": "A count. At least 1.", "minimum": 1}}
    (meta / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"validate": {"options": options}}}))
    problems = "\n".join(_specs.problems(str(tmp_path)))
    assert "'At least one.' is not one of the description sentences" in problems
    assert "'Not C(/).' is not one of the description sentences" in problems
    assert "a maximum sentence does not apply to type bool" in problems
    assert "x_count has keys the role argument spec schema does not know: minimum" in problems
    assert "x_count: default 0 breaks its own bound (minimum 1)" in problems


def test_the_owner_declares_what_it_ships():
    """Every key of a role's defaults/main.yml is an optional option of that role's spec (roles/common's defaults
    derived from the topology fact: of the one role that declares them)."""
    problems = {}
    for role in ROLES:
        declared = _declared(role)
        for name in _defaults(role):
            owner = FROM_FACT.get(name, role) if role == SHARED else role
            spec = _declared(owner).get(name) if owner != role else declared.get(name)
            if spec is None:
                problems.setdefault(role, []).append("%s is in defaults/main.yml but not declared by %s" % (name, owner))
            elif spec.get("required"):
                problems.setdefault(role, []).append("%s is required but has a role default" % name)
    assert not problems, "defaults/main.yml and argument_specs disagree:\n" + _report(problems)


def test_a_declared_optional_option_is_shipped():
    """An optional option has a default in the declaring role's defaults/main.yml (or roles/common's, for the ones
    derived from the fact); only the fact and the optional per-host inventory values have none."""
    problems = {}
    for role in ROLES:
        for name, spec in _declared(role).items():
            if (spec or {}).get("required") or name in FACTS | INVENTORY_ONLY:
                continue
            ships = _defaults(SHARED if name in FROM_FACT else role)
            if name not in ships:
                problems.setdefault(role, []).append("%s is optional but no defaults/main.yml of the role ships it"
                                                     % name)
    assert not problems, "optional options without a shipped default:\n" + _report(problems)


def test_spec_defaults_equal_role_defaults():
    problems = {}
    for role in ROLES:
        for name, spec in _declared(role).items():
            shipped, value = _owner_default(name)
            if shipped and "default" in (spec or {}) and spec["default"] != value:
                problems.setdefault(role, []).append(
                    "%s: spec default %r != defaults/main.yml %r" % (name, spec["default"], value))
    assert not problems, "argument_specs defaults differ from defaults/main.yml:\n" + _report(problems)


def test_a_role_reads_only_options_it_declares_or_sees():
    """What a role reads is declared in its own spec, roles/common's or an imported role's; a fact-derived value of
    roles/common may be read anywhere; another role's option only as 'name | default(<its shipped default>)'."""
    every = set()
    for role in ROLES:
        every |= set(_declared(role)) | set(_defaults(role))
    problems = {}
    for role in ROLES:
        visible = _visible(role)
        for path, expr in _role_expressions(role):
            for name in set(_NAME.findall(expr)) & every:
                if name in visible or name in FROM_FACT or _fallback_matches(expr, name):
                    continue
                problems.setdefault(role, set()).add("%s reads %s, which neither its spec, roles/common's nor an "
                                                     "imported role's declares" % (path, name))
    assert not problems, "options read where they are not declared:\n" + _report(
        {role: sorted(msgs) for role, msgs in problems.items()})


def test_the_imports_are_found():
    for role, imported in IMPORTS.items():
        assert set(imported) <= set(_imports(role)), (role, _imports(role))


def test_the_fact_derived_values_are_declared_by_a_reader():
    for name, role in FROM_FACT.items():
        assert name in _defaults(SHARED), "%s is no longer roles/common's default: update FROM_FACT" % name
        assert name in _declared(role), "%s must be declared by roles/%s" % (name, role)
        assert name not in _declared(SHARED), "roles/common's spec cannot carry %s (checked before the fact)" % name
        assert any(re.search(r"(?<![\w.])%s(?!\w)" % name, expr) for _path, expr in _role_expressions(role)), \
            "roles/%s declares %s but does not read it" % (role, name)
    assert set(FROM_FACT) == set(_specs.from_fact(str(ROLES_DIR))) & set(_defaults(SHARED))


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
    comment = (INVENTORY / "hosts.yml").read_text(encoding="utf-8")
    for name in INVENTORY_ONLY:
        assert name in comment, "inventories/a3/hosts.yml does not name the optional per-host value %s" % name


def test_required_options_are_defined_by_the_inventory():
    inventory = _inventory_vars()
    passed = _vars_passed_by_wrappers()
    problems = {}
    for role in ROLES:
        for entry_point, spec in _specs_of(role).items():
            for name, option in ((spec or {}).get("options") or {}).items():
                if (option or {}).get("required") and name not in inventory | passed.get(role, set()) | FACTS:
                    problems.setdefault(role, []).append(
                        "%s (entry point %s) is required but neither inventories/a3/hosts.yml, a wrapper role nor "
                        "roles/common's fact defines it" % (name, entry_point))
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
        for entry_point, spec in _specs_of(role).items():
            missing = _undescribed((spec or {}).get("options"))
            if missing:
                problems.setdefault(role, []).append("%s: %s" % (entry_point, ", ".join(missing)))
            if not (spec or {}).get("short_description"):
                problems.setdefault(role, []).append("%s: no short_description" % entry_point)
    assert not problems, "options without a description:\n" + _report(problems)


def test_entry_points_follow_the_task_files():
    problems = {}
    for role in ROLES:
        specs = _specs_of(role)
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
    # by full name: Galaxy's importer resolves no short role name
    want = [] if role == SHARED else ["ascend.vllm_pd." + SHARED]
    assert deps == want, "%s: meta/main.yml dependencies must be %s (the shared values), got %s" % (role, want, deps)
