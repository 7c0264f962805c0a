# -*- coding: utf-8 -*-
"""Roles call roles by their full name, ascend.vllm_pd.<role>: every import_role/include_role name in the roles'
task files and the playbooks, every roles: entry of a play and every meta/main.yml dependency. A short name
resolves inside a run of the collection, but Galaxy's importer looks it up as a standalone role and warns that
the role was not found; the full name resolves the same from the checkout (ansible.cfg's collections_path holds
the link setup.sh makes) and from the installed tarball (tests/collection)."""
from __future__ import annotations

import re
import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "ascend.vllm_pd."
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
FILES = sorted((ROOT / "roles").glob("*/tasks/**/*.yml")) + sorted((ROOT / "roles").glob("*/handlers/*.yml")) \
    + sorted((ROOT / "playbooks").glob("**/*.yml")) + [ROOT / "site.yml"]


def _load_generator():
    spec = importlib.util.spec_from_file_location("role_readmes", ROOT / "hacking" / "role_readmes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# every task of a task list, blocks included: the README generator's own walk
_tasks = _load_generator()._tasks  # pylint: disable=protected-access


def references(data) -> list:
    """The role names a task file or a playbook gives: import_role/include_role names and roles: entries."""
    found = []
    play_keys = ("hosts", "import_playbook", "ansible.builtin.import_playbook")
    plays = [p for p in data or [] if isinstance(p, dict) and any(key in p for key in play_keys)]
    for play in plays or [{"tasks": data}]:
        for entry in play.get("roles") or []:
            found.append(str(entry.get("role", entry.get("name")) if isinstance(entry, dict) else entry))
        for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            for task in _tasks(play.get(key)):
                for action in ("import_role", "include_role"):
                    args = task.get("ansible.builtin." + action, task.get(action))
                    if isinstance(args, dict) and args.get("name"):
                        found.append(str(args["name"]))
    return found


def problem(name: str):
    """Why a role reference is wrong, or None. A name that is a template as a whole (a loop variable) names no
    role here; the strings it takes are role names of the same play, checked where they are written."""
    if re.fullmatch(r"\{\{[^}]*\}\}", name.strip()):
        return None
    if not name.startswith(PREFIX):
        return "%s is not a full name (%s<role>)" % (name, PREFIX)
    pattern = ".+".join(re.escape(part) for part in re.split(r"\{\{.*?\}\}", name[len(PREFIX):]))
    if not any(re.fullmatch(pattern, role) for role in ROLES):
        return "%s names no role of the collection" % name
    return None


def test_the_tasks_and_playbooks_call_roles_by_full_name():
    problems = []
    seen = 0
    for path in FILES:
        for name in references(yaml.safe_load(path.read_text(encoding="utf-8"))):
            seen += 1
            why = problem(name)
            if why:
                problems.append("%s: %s" % (path.relative_to(ROOT), why))
    assert seen > 40, seen   # the scan finds the collection's role calls
    assert not problems, "role references by short or unknown name:\n" + "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_meta_dependencies_by_full_name(role):
    meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text(encoding="utf-8")) or {}
    for dep in meta.get("dependencies") or []:
        name = str(dep.get("role", dep.get("name")) if isinstance(dep, dict) else dep)
        assert problem(name) is None, "%s: meta/main.yml dependency %s" % (role, problem(name))


def test_the_check_itself():
    assert problem("vllm") == "vllm is not a full name (ascend.vllm_pd.<role>)"
    assert problem("ascend.vllm_pd.nope") == "ascend.vllm_pd.nope names no role of the collection"
    assert problem("ascend.vllm_pd.vllm_{{ side }}") is None and problem("{{ a3_render_role }}") is None
    assert problem("ascend.vllm_pd.x{{ side }}") is not None
    play = [{"hosts": "all", "roles": ["common", {"role": "ascend.vllm_pd.etcd"}],
             "tasks": [{"block": [{"ansible.builtin.include_role": {"name": "supervise"}}]}]}]
    assert references(play) == ["common", "ascend.vllm_pd.etcd", "supervise"]
    assert references([{"import_role": {"name": "vllm"}}]) == ["vllm"]
