# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ascend.vllm_pd.converge_state: the digest of the run's inputs, computed on the controller,
then one module call on the node (see plugins/modules/converge_state.py).

The inputs are everything a converge of the node follows: the collection's own roles, plugins and playbooks
(role defaults and templates included), ansible-core's version, the prefill and decode groups, every variable of
the collection's prefixes and ansible_host of every prefill/decode host (templated, with extra vars), and the
content of the controller files and directories named by *_src and *_src_dir variables. Only a whole run (no
--tags, --skip-tags or --limit) compares or records: a run of a part cannot say the whole node is converged."""
from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.vllm_pd.plugins.module_utils._converge_state import (
    controller_paths, digest, file_sha, input_variables, tree_shas, whole_run)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# controller files larger than this are said by size and modification time (the package archives)
MAX_HASHED = 1 << 20


def plain(value):
    """A templated value as plain data (lazy containers iterated through their templating accessors)."""
    if isinstance(value, dict):
        return {to_text(k): plain(value[k]) for k in list(value.keys())}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return to_text(value)


def host_inputs(hostvars, host) -> dict:
    hv = hostvars[host]
    out = {}
    for key in input_variables(dict.fromkeys(hv.keys())):
        try:
            out[key] = plain(hv[key])
        except Exception as e:  # pylint: disable=broad-except  # an undefined value is an input as it is
            out[key] = "not templated: %s" % to_text(e)
    return out


def controller_inputs(paths) -> dict:
    out = {}
    for path in paths:
        if os.path.isdir(path):
            out[path] = tree_shas(path, subdirs=("",), max_bytes=MAX_HASHED)
        elif os.path.exists(path):
            out[path] = file_sha(path, MAX_HASHED)
    return out


def run_inputs(task_vars) -> dict:
    groups = task_vars.get("groups", {})
    hosts = sorted(set(groups.get("prefill", [])) | set(groups.get("decode", [])))
    values = {h: host_inputs(task_vars["hostvars"], h) for h in hosts}
    named = sorted({p for v in values.values() for p in controller_paths(v)})
    return {"collection": tree_shas(COLLECTION_ROOT),
            "ansible": (task_vars.get("ansible_version") or {}).get("full"),
            "groups": {g: list(groups.get(g, [])) for g in ("prefill", "decode")},
            "hosts": values,
            "controller_files": controller_inputs(named)}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        partial = whole_run(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"),
                            task_vars.get("ansible_limit"))
        if partial:
            result.update(changed=False, whole_run=False, in_sync=False, reasons=partial, digest="")
            return result
        args = dict(self._task.args)
        if not args.get("digest"):
            args["digest"] = digest(run_inputs(task_vars))
        result.update(self._execute_module(module_name="ascend.vllm_pd.converge_state", module_args=args,
                                           task_vars=task_vars))
        result["whole_run"] = True
        return result
