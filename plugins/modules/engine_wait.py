#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: engine_wait
short_description: Wait for vLLM engine ranks to answer /health, failing early on fatal log lines
description:
  - Polls each URL until it answers HTTP 200 while reading the launcher's log from a byte offset; a line matching
    one of O(signatures) ends the wait at once with that signature's advice and the log tail.
  - Also ends early when O(alive_command) says the launcher is gone.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  urls:
    description: Health URLs, one per engine rank on this host.
    type: list
    elements: str
    required: true
  log_path:
    description: Launcher log (vllm_log.log) on this host.
    type: path
  log_offset:
    description: Byte offset to start reading the log from (the size before this start).
    type: int
    default: 0
  signatures:
    description: List of C(pattern) (regular expression) and C(advice).
    type: list
    elements: dict
    default: []
  timeout:
    description: Seconds to wait in total.
    type: int
    default: 3600
  interval:
    description: Seconds between polls.
    type: int
    default: 5
  signatures_fatal:
    description:
      - Whether a line matching O(signatures) ends the wait at once.
      - "Set it to V(false) when this run started nothing and a supervisor owns the engines' restarts: a crash
        it recovers from must not fail the wait; the newest matching line still explains a wait that times out."
    type: bool
    default: true
  alive_command:
    description:
      - Command (argv) that exits 0 while the launcher still runs; the wait ends early when it fails.
      - The launcher runs in the container's PID namespace, so this is typically a C(docker exec) of a
        C(kill -0) on its process group.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    description: Read-only; in check mode it returns at once.
  diff_mode:
    support: none
    description: Nothing to diff.
"""

EXAMPLES = r"""
- name: Wait for the ranks
  ascend.vllm_pd.engine_wait:
    urls: [http://10.0.0.11:6700/health]
    log_path: /var/lib/ascend-vllm-pd/vllm_log.log
    signatures: [{pattern: "Address already in use", advice: "move the kv port"}]
    timeout: 3600
"""

RETURN = r"""
ready:
  description: URLs that answered.
  returned: always
  type: list
  elements: str
pending:
  description: URLs that did not answer.
  returned: always
  type: list
  elements: str
log_tail:
  description: Last lines of the log read during the wait.
  returned: always
  type: str
waited:
  description: Seconds waited.
  returned: always
  type: float
"""

import subprocess

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._engine_wait import wait


def _command_alive(argv):
    def alive():
        try:
            return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
                                  check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return True  # cannot tell: keep waiting for /health
    return alive


def main():
    module = AnsibleModule(
        argument_spec=dict(
            urls=dict(type="list", elements="str", required=True),
            log_path=dict(type="path"),
            log_offset=dict(type="int", default=0),
            signatures=dict(type="list", elements="dict", default=[]),
            timeout=dict(type="int", default=3600),
            interval=dict(type="int", default=5),
            alive_command=dict(type="list", elements="str"),
            signatures_fatal=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, ready=[], pending=p["urls"], log_tail="", waited=0.0)
    for sig in p["signatures"]:
        if "pattern" not in sig:
            module.fail_json(msg="each signature needs a 'pattern' (and an 'advice'): got %r" % (sig,))
    res = wait(p["urls"], p["log_path"], p["signatures"], p["timeout"], p["interval"], p["log_offset"],
               alive=_command_alive(p["alive_command"]) if p["alive_command"] else None,
               signatures_fatal=p["signatures_fatal"])
    out = {k: res[k] for k in ("ready", "pending", "log_tail", "waited")}
    if res["ok"]:
        module.exit_json(changed=False, **out)
    if res["signature"] and res["pending"] and not p["signatures_fatal"]:
        msg = ("engines not ready after %ss: %s do not answer /health; the newest fatal log line: '%s' (%s). "
               "Advice: %s. Log tail:\n%s"
               % (res["waited"], ", ".join(res["pending"]), res["line"], res["signature"]["pattern"],
                  res["signature"].get("advice", ""), res["log_tail"]))
    elif res["signature"]:
        msg = ("engine start failed after %ss: log line '%s' (%s). Advice: %s. Not answering: %s. Log tail:\n%s"
               % (res["waited"], res["line"], res["signature"]["pattern"], res["signature"].get("advice", ""),
                  ", ".join(res["pending"]), res["log_tail"]))
    else:
        msg = ("engines not ready after %ss: %s do not answer /health (ready: %s). A rank only comes up once its "
               "whole DP group formed: check the other host of the group, --data-parallel-address (the group's "
               "first host) and the NIC variables (seed FAQ). Log tail:\n%s"
               % (res["waited"], ", ".join(res["pending"]), ", ".join(res["ready"]) or "none", res["log_tail"]))
    module.fail_json(msg=msg, **out)


if __name__ == "__main__":
    main()
