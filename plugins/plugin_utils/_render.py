# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers shared by the role templates and the render plan: vllm serve flags, shell
quoting, and the per-instance process list exactly as run_dp_template.sh will run it."""
from __future__ import annotations

import json
import re
import shlex

# What a shell expands that expand() knows: $NAME, ${NAME} and the positional $1..$9 (one digit: "$12" is
# "$1" then "2", as in sh).
_VAR_RE = re.compile(r"\$([A-Za-z_]\w*|\d|\{\w+\})")
# A "$" that starts anything else ($(cmd), $((x)), ${X:-y}, $$, $?, a trailing $) is escaped by shell_dq.
_OTHER_DOLLAR_RE = re.compile(r"\$(?![A-Za-z_\d]|\{\w+\})")


def engine_env(common, side_env=None, extra=None) -> dict:
    """The environment of vllm serve on one side: vllm_env_common, then vllm_<side>_env over it, then
    vllm_env_extra over both (a later layer wins; keys keep their first position, as Jinja's combine does).
    The vllm role (vllm_side_env) and the preflight's checks of that environment both read this."""
    env = {}
    for layer in (common, side_env, extra):
        env.update(layer or {})
    return env


def serve_flag_pairs(flags: dict) -> list:
    """Ordered [flag, value-or-None] pairs: true -> bare flag, false/None -> omitted,
    dict/list -> JSON text, anything else -> str."""
    out = []
    for flag, value in (flags or {}).items():
        if value is None or value is False:
            continue
        if value is True:
            out.append(["--%s" % flag, None])
        elif isinstance(value, (dict, list)):
            out.append(["--%s" % flag, json.dumps(value)])
        else:
            out.append(["--%s" % flag, str(value)])
    return out


def valued_flags(flags: dict) -> list:
    """[--flag, value, ...] for programs whose every flag takes a value (the datasystem worker, the proxy):
    booleans as true/false, anything else as str."""
    out = []
    for flag, value in (flags or {}).items():
        out += ["--%s" % flag, str(value).lower() if isinstance(value, bool) else str(value)]
    return out


def serve_lines(flags: dict) -> list:
    """Shell-quoted 'flag value' lines for a script."""
    return [flag if value is None else "%s %s" % (flag, shlex.quote(value))
            for flag, value in serve_flag_pairs(flags)]


def shell_dq(value) -> str:
    """Escape a value for a double-quoted shell string: $NAME, ${NAME} and $1..$9 still expand (as expand()
    does), nothing else does: no command substitution, arithmetic, ${X:-default} or special parameter."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
    return _OTHER_DOLLAR_RE.sub(r"\\$", text)


def expand(value, variables: dict) -> str:
    """Expand $NAME / ${NAME} from `variables`; unknown names are left as they are."""
    def sub(match):
        name = match.group(1).strip("{}")
        return str(variables[name]) if name in variables else match.group(0)
    return _VAR_RE.sub(sub, str(value))


def launcher_argv(python: str, me: dict) -> list:
    """launch_online_dp.py arguments of one host (seed step 5, '启动 vLLM 服务')."""
    return [python, "launch_online_dp.py",
            "--dp-size", str(me["dp_size"]), "--tp-size", str(me["tp_size"]),
            "--dp-size-local", str(me["dp_size_local"]), "--dp-rank-start", str(me["dp_rank_start"]),
            "--dp-address", str(me["dp_address"]), "--dp-rpc-port", str(me["dp_rpc_port"]),
            "--vllm-start-port", str(me["vllm_start_port"])]


def engine_processes(me: dict, env: dict, flags: dict, kv_json_by_rank: dict, model_path: str,
                     bind_host: str, worker_addr: str, unset=(), base_env=None) -> list:
    """The `vllm serve` processes launch_online_dp.py starts on this host, with run_dp_template.sh's
    positional arguments and shell variables expanded: what will really run."""
    procs = []
    for inst in me["instances"]:
        positional = {
            "1": ",".join(str(d) for d in inst["devices"]), "2": str(inst["api_port"]),
            "3": str(me["dp_size"]), "4": str(inst["dp_rank"]), "5": str(me["dp_address"]),
            "6": str(me["dp_rpc_port"]), "7": str(me["tp_size"]),
        }
        shell = dict(base_env or {})
        shell.update(positional)
        shell.update(nic_name=me["nic_name"], local_ip=me["business_ip"], ds_worker_addr=worker_addr)
        expanded = {}
        for key, value in env.items():
            expanded[key] = expand(value, shell)
            shell[key] = expanded[key]
        for key in unset:
            expanded.pop(key, None)
        argv = ["vllm", "serve", model_path, "--host", bind_host, "--port", positional["2"],
                "--data-parallel-size", positional["3"], "--data-parallel-rank", positional["4"],
                "--data-parallel-address", positional["5"], "--data-parallel-rpc-port", positional["6"],
                "--tensor-parallel-size", positional["7"]]
        for flag, value in serve_flag_pairs(flags):
            argv.append(flag)
            if value is not None:
                argv.append(value)
        argv += ["--kv-transfer-config", kv_json_by_rank[inst["dp_rank"]]]
        procs.append({"name": "vllm serve (dp rank %d)" % inst["dp_rank"], "argv": argv,
                      "env": dict(sorted(expanded.items())), "started_by": "launch_online_dp.py"})
    return procs
