# -*- coding: utf-8 -*-
"""Task patterns that look right and are not, checked in every task file of the collection.

``until: <reg> is succeeded`` (or ``is success`` / ``is failed`` / ``is not failed``) together with
``failed_when: false`` never retries: Ansible applies failed_when before it evaluates until, so every
attempt already counts as a success. A wait written that way gives up at the first try (the proxy's
/healthcheck wait did, and the demo failed whenever the proxy took a second to start). Retry on what
the result says instead (``until: reg.status | default(-1) == 200``, ``until: reg.rc == 0``).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TASK_FILES = sorted(list((ROOT / "roles").glob("*/tasks/*.yml")) + list((ROOT / "playbooks").glob("*.yml"))
                    + list((ROOT / "molecule").glob("*/*.yml")))
STATUS_TEST = re.compile(r"\bis\s+(not\s+)?(succeeded|success|successful|failed|failure)\b")


def _tasks(node):
    """Every task dict in a task file or playbook, blocks and plays included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(key in node for key in ("block", "tasks", "pre_tasks", "post_tasks", "handlers", "rescue", "always")):
            for key in ("block", "tasks", "pre_tasks", "post_tasks", "handlers", "rescue", "always"):
                yield from _tasks(node.get(key) or [])
        else:
            yield node


def _never_fails(value):
    return value is False or str(value).strip().lower() in ("false", "no", "{{ false }}")


def test_no_until_on_the_status_of_a_task_that_cannot_fail():
    bad = []
    for path in TASK_FILES:
        for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8")) or []):
            until = task.get("until")
            if until is not None and _never_fails(task.get("failed_when")) and STATUS_TEST.search(str(until)):
                bad.append("%s: %r (until: %s)" % (path.relative_to(ROOT), task.get("name"), until))
    assert not bad, "until on the task's status with failed_when: false never retries:\n" + "\n".join(bad)


def test_the_check_sees_the_pattern():
    task = {"name": "wait", "uri": {"url": "http://x"}, "register": "r", "until": "r is succeeded", "failed_when": False}
    play = [{"hosts": "all", "tasks": [{"block": [task]}]}]
    assert [t["name"] for t in _tasks(play)] == ["wait"]
    assert _never_fails(task["failed_when"]) and STATUS_TEST.search(task["until"])
    assert not STATUS_TEST.search("r.status | default(-1) == 200")


# One restart mechanism (issue 15): a role's tasks only notify; the restart itself is a handler
# (roles/<role>/handlers/main.yml), which also has a check-mode twin for the plan.
RESTART_TEXT = re.compile(r"\bsystemctl\s+(restart|reload|try-restart|reload-or-restart)\b|\bdocker\s+restart\b")


def _restarts(task):
    """Why a task restarts a service itself, or None."""
    for module, args in task.items():
        short = str(module).rsplit(".", 1)[-1]
        if short in ("systemd_service", "systemd", "service") and isinstance(args, dict):
            if re.search(r"restarted|reloaded", str(args.get("state", ""))):
                return "%s state %s" % (short, args.get("state"))
        if short == "docker_container" and isinstance(args, dict) and args.get("restart") not in (None, False, "false", "no"):
            return "docker_container restart: %s" % args.get("restart")
        if short in ("shell", "command", "raw"):
            text = args if isinstance(args, str) else " ".join(str(v) for v in (args or {}).values())
            if RESTART_TEXT.search(text):
                return "%s runs %s" % (short, RESTART_TEXT.search(text).group(0))
    return None


def test_services_restart_only_through_handlers():
    bad = []
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8")) or []):
            why = _restarts(task)
            if why:
                bad.append("%s: %r (%s)" % (path.relative_to(ROOT), task.get("name"), why))
    assert not bad, "restart through the role's handler (notify it) instead:\n" + "\n".join(bad)


def test_every_restart_handler_adds_to_the_check_mode_plan():
    missing = []
    for path in sorted((ROOT / "roles").glob("*/handlers/main.yml")):
        handlers = list(_tasks(yaml.safe_load(path.read_text(encoding="utf-8")) or []))
        plan_topics = set()
        for h in handlers:
            facts = h.get("ansible.builtin.set_fact") or h.get("set_fact") or {}
            if any(k.endswith("_restart_plan") for k in facts):
                listen = h.get("listen", h.get("name"))
                plan_topics.update(listen if isinstance(listen, list) else [listen])
        for h in handlers:
            if _restarts(h) or "Stop the engines" in str(h.get("name")):
                topics = h.get("listen", h.get("name"))
                topics = topics if isinstance(topics, list) else [topics]
                if not plan_topics.intersection(topics) and "canary" not in str(h.get("name")):
                    missing.append("%s: %r" % (path.relative_to(ROOT), h.get("name")))
    assert not missing, "a restart handler without a check-mode twin (a set_fact of <role>_restart_plan listening to it):\n" \
        + "\n".join(missing)


def test_the_restart_check_sees_each_form():
    assert _restarts({"ansible.builtin.systemd_service": {"name": "x", "state": "restarted"}})
    assert _restarts({"ansible.builtin.systemd_service": {"name": "x", "state": "{{ 'restarted' if c else 'started' }}"}})
    assert _restarts({"community.docker.docker_container": {"name": "x", "restart": "{{ files is changed }}"}})
    assert _restarts({"ansible.builtin.shell": {"cmd": "systemctl reset-failed x; systemctl restart x"}})
    assert _restarts({"ansible.builtin.shell": "docker restart proxy"})
    assert not _restarts({"ansible.builtin.systemd_service": {"name": "x", "state": "started", "enabled": True}})
    assert not _restarts({"community.docker.docker_container": {"name": "x", "state": "started"}})
    assert not _restarts({"ansible.builtin.shell": {"cmd": "systemctl is-active --quiet x"}})


def test_status_names_the_etcd_unit_the_etcd_role_installs():
    """playbooks/status.yml does not load the etcd role (three more task rounds on every status): its fallback for
    etcd_service_name must be the role's default, or status would read a unit that does not exist."""
    default = yaml.safe_load((ROOT / "roles" / "etcd" / "defaults" / "main.yml").read_text())["etcd_service_name"]
    status = (ROOT / "playbooks" / "status.yml").read_text()
    fallbacks = re.findall(r"etcd_service_name\s*\|\s*default\('([^']*)'\)", status)
    assert fallbacks == [default], (fallbacks, default)
