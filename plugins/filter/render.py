# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import (
    engine_env, engine_processes, engine_wait_argv, launcher_argv, local_urls, peer_urls, prefill_restarts,
    restart_reasons, serve_lines, shell_dq, start_log_offset, valued_flags)


class FilterModule:
    def filters(self):
        return {
            "serve_lines": serve_lines,
            "shell_dq": shell_dq,
            "launcher_argv": launcher_argv,
            "engine_processes": engine_processes,
            "engine_env": engine_env,
            "valued_flags": valued_flags,
            "engine_wait_argv": engine_wait_argv,
            "local_urls": local_urls,
            "peer_urls": peer_urls,
            "restart_reasons": restart_reasons,
            "prefill_restarts": prefill_restarts,
            "start_log_offset": start_log_offset,
        }
