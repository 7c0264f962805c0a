# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: engine_env
short_description: The environment of one side's engines (common, then the side's, then the extra layer)
description:
  - Merges C(vllm_env_common), then C(vllm_<side>_env), then C(vllm_env_extra) (a later layer wins; a name keeps its
    first position).
  - The same file provides what renders the engines' scripts, see plugins/plugin_utils/_render.py - C(serve_lines),
    C(shell_dq), C(launcher_argv), C(engine_processes) and C(valued_flags) (a dict of flags and values as the list
    C(--flag value ...), booleans as true or false).
  - And the vllm role's derived values (roles/vllm/vars/main.yml) - C(engine_wait_argv) (the arguments of the
    engine unit's wait for its container, openYuanrong worker and DP master), C(local_urls) and C(peer_urls) (the
    API URLs of this node's instances and of the rest of its DP group), C(restart_reasons) and C(prefill_restarts)
    (why a DP group restarts; whether a prefill group restarts, so decode restarts with it) and
    C(start_log_offset) (where the health wait reads the log after a start).
positional: _input
options:
  _input:
    description: C(vllm_env_common).
    type: dict
    required: true
  side:
    description: The side's own layer, C(vllm_prefill_env) or C(vllm_decode_env).
    type: dict
    default: {}
  extra:
    description: C(vllm_env_extra).
    type: dict
    default: {}
"""

EXAMPLES = r"""
vllm_side_env: "{{ vllm_env_common | ascend.vllm_pd.engine_env(vllm_decode_env, vllm_env_extra) }}"
"""

RETURN = r"""
_value:
  description: The merged environment.
  type: dict
"""

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
