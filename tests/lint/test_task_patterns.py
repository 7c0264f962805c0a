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
