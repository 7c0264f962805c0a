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


def _by_rank(by_rank: dict, rank):
    """The entry of a dp rank in a dict keyed by the rank as text (a module's result, e.g. kv_transfer_config's
    by_rank) or as an int."""
    return by_rank[str(rank)] if str(rank) in by_rank else by_rank[rank]


def engine_processes(me: dict, env: dict, flags: dict, kv_json_by_rank: dict, model_path: str,
                     bind_host: str, worker_addr: str, unset=(), base_env=None) -> list:
    """The `vllm serve` processes launch_online_dp.py starts on this host, with run_dp_template.sh's
    positional arguments and shell variables expanded: what will really run. kv_json_by_rank: the
    --kv-transfer-config JSON of each dp rank (kv_transfer_config's by_rank)."""
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
        argv += ["--kv-transfer-config", _by_rank(kv_json_by_rank, inst["dp_rank"])]
        procs.append({"name": "vllm serve (dp rank %d)" % inst["dp_rank"], "argv": argv,
                      "env": dict(sorted(expanded.items())), "started_by": "launch_online_dp.py"})
    return procs


# --- The vllm role's derived values (roles/vllm/vars/main.yml) ---------------------------------------------

# What a DP member's start waits for at most on its DP master: the engines' own DP-group timeout, vLLM's default
# when the environment does not set it.
READY_TIMEOUT_ENV = "VLLM_ENGINE_READY_TIMEOUT_S"
READY_TIMEOUT_DEFAULT = 600
MASTER_WHAT = "DP master RPC (--data-parallel-address)"
_OFFSET_RE = re.compile(r"log offset ([0-9]+)")


def jinja_int(value, default=0) -> int:
    """Jinja's int filter: an int, a decimal text or a float's integer part, else default."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return default


def master_wait(me: dict, env=None):
    """What a DP group member's start waits for on its DP master ({address, what, timeout}), or None on the node of
    dp rank 0 (the master itself)."""
    if jinja_int(me["dp_rank_start"]) == 0:
        return None
    env = env or {}
    timeout = jinja_int(env[READY_TIMEOUT_ENV]) if READY_TIMEOUT_ENV in env else READY_TIMEOUT_DEFAULT
    return {"address": "%s:%s" % (me["dp_address"], me["dp_rpc_port"]), "what": MASTER_WHAT, "timeout": timeout}


def engine_wait_argv(me: dict, container, timeout, log_path: str, env=None, worker=None) -> list:
    """Arguments of `a3_supervise.py wait` before an engine start (the unit's ExecStartPre): the container, then
    the local openYuanrong worker when the pool has one (worker: {address, what, ready_file, ready_what}; its port,
    required, and its unit's readiness mark), then on a DP member the master's RPC port, soft: waited for up to
    the engines' own DP-group timeout (env's VLLM_ENGINE_READY_TIMEOUT_S, else 600 s), then the start goes on and
    the engine reports a wrong DP address itself."""
    argv = ["--container", str(container), "--timeout", str(timeout)]
    if worker:
        argv += ["--tcp=%s" % worker["address"], "--what=%s" % worker["what"],
                 "--file=%s" % worker["ready_file"], "--file-what=%s" % worker["ready_what"]]
    master = master_wait(me, env)
    if master:
        argv += ["--soft-tcp=%s" % master["address"], "--soft-what=%s" % master["what"],
                 "--soft-timeout", str(master["timeout"]), "--log", log_path]
    return argv


def local_urls(me: dict, host: str) -> list:
    """http://host:port of each engine instance of this node (its API ports)."""
    return ["http://%s:%s" % (host, inst["api_port"]) for inst in me["instances"]]


def peer_urls(group: dict, local=()) -> list:
    """http://host:port of every instance of a DP group (a3.sides[side].groups[n]: backend_hosts and api_ports,
    one entry per instance), except the local ones."""
    urls = ["http://%s:%s" % (host, port) for host, port in zip(group["backend_hosts"], group["api_ports"])]
    return [url for url in urls if url not in local]


def restart_reasons(group_hosts, hostvars, play_hosts, pair_restart=False, asked=False) -> list:
    """Why a DP group restarts, from the facts run.yml set on each member in this play (vllm_config_changed,
    vllm_launcher_changed, vllm_running), then the pair's restart and the operator's vllm_restart."""
    members = [(host, hostvars[host]) for host in group_hosts if host in play_hosts]
    changed = [host for host, facts in members if facts.get("vllm_config_changed")]
    launcher = [host for host, facts in members if facts.get("vllm_launcher_changed")]
    down = [host for host, facts in members if "vllm_running" in facts and not facts["vllm_running"]]
    reasons = []
    if changed:
        reasons.append("configuration changed on " + ", ".join(changed))
    if launcher:
        reasons.append("launch_online_dp.py differs from the image's on " + ", ".join(launcher))
    if down:
        reasons.append("not running on " + ", ".join(down))
    if pair_restart:
        reasons.append("the prefill group restarts (a pair restarts together)")
    if asked:
        reasons.append("a restart was asked for (vllm_restart)")
    return reasons


def prefill_restarts(prefill_hosts, hostvars, topo_hosts, play_hosts, play_hosts_all) -> bool:
    """Whether a prefill DP group restarts, so decode restarts with it: one restarted in an earlier play of the run
    (vllm_prefill, then vllm_decode), or one that decided so in this play (vllm_group_start) with its whole DP
    group in the run (a partial group is refused and restarts nothing)."""
    for host in prefill_hosts:
        facts = hostvars[host]
        if facts.get("vllm_restarted", False):
            return True
        if host in play_hosts and facts.get("vllm_group_start", False) \
                and not set(topo_hosts[host]["group_hosts"]) - set(play_hosts_all):
            return True
    return False


def start_log_offset(outputs, fallback) -> int:
    """Where the health wait reads the engines' log from after the handlers started them: the size the start
    printed first ("log offset N", in the first of the outputs that has one), else fallback (the role's read)."""
    found = _OFFSET_RE.findall("\n".join(str(out or "") for out in outputs))
    return int(found[0]) if found else jinja_int(fallback)
