# -*- coding: utf-8 -*-
"""Benchmark-only callback (not part of the collection): records, for every host and task, when the task started
and ended on that host, and writes them as JSON lines to $A3_TIMINGS_FILE at the end of the run.
benchmarks/sim_bench.py enables it with ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback ANSIBLE_CALLBACKS_ENABLED=a3_timings."""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: a3_timings
type: aggregate
short_description: per host and task start and end times, as JSON lines (benchmarks only)
description: Writes one JSON object per host and task to the file named by the environment variable A3_TIMINGS_FILE.
requirements: [enable in the configuration]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "a3_timings"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._started = {}
        self._rows = []

    def v2_runner_on_start(self, host, task):
        self._started[(host.get_name(), task._uuid)] = time.time()

    def _end(self, result, status):
        key = (result._host.get_name(), result._task._uuid)
        start = self._started.pop(key, None)
        if start is None:
            return
        self._rows.append({"host": key[0], "task": result._task.get_name(), "action": result._task.action,
                           "status": status, "start": start, "end": time.time()})

    def v2_runner_on_ok(self, result):
        self._end(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._end(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._end(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._end(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("A3_TIMINGS_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                for row in self._rows:
                    out.write(json.dumps(row) + "\n")
