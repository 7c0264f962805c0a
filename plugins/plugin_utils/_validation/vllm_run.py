# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the vllm role's start and health watch: the /health polls, the launcher's log file and the canary's
bounds for frozen ranks."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, as_int, reads


@reads("vllm_health_interval", "vllm_health_timeout", "vllm_log_file")
def check_health_and_log(h, ctx):
    interval, timeout = as_int(h.get("vllm_health_interval")), as_int(h.get("vllm_health_timeout"))
    if interval and timeout and interval >= timeout > 0:
        h.error("vllm_health_interval", interval, "it is not below vllm_health_timeout (%d), so the start is "
                "judged on one poll: set a shorter interval (default 5)" % timeout)
    log = h.get("vllm_log_file")
    if log is not ABSENT and not (isinstance(log, str) and log.strip() and not log.startswith("/")
                                  and ".." not in log.split("/")):
        h.error("vllm_log_file", log, "it is a file name in a3_work_dir: set e.g. vllm_log.log")


@reads("vllm_peer_wait", "vllm_down_grace", "vllm_canary_interval")
def check_frozen_rank_bounds(h, ctx):
    wait, grace = as_int(h.get("vllm_peer_wait")), as_int(h.get("vllm_down_grace"))
    interval = as_int(h.get("vllm_canary_interval"))
    if wait is None or grace is None or interval is None or wait <= 0 or grace <= 0 or interval <= 0:
        return
    if wait < grace + 2 * interval:
        h.warn("vllm_peer_wait", wait, "it is below vllm_down_grace + 2 x vllm_canary_interval (%d): ranks stalled by "
               "a frozen peer would restart before the peer's own node restarts it, and their group cannot form "
               "while it stays frozen: set at least %d" % (grace + 2 * interval, grace + 2 * interval))
