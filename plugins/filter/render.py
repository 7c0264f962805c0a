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
    engine_env, engine_processes, launcher_argv, serve_lines, shell_dq, valued_flags)


class FilterModule:
    def filters(self):
        return {
            "serve_lines": serve_lines,
            "shell_dq": shell_dq,
            "launcher_argv": launcher_argv,
            "engine_processes": engine_processes,
            "engine_env": engine_env,
            "valued_flags": valued_flags,
        }
