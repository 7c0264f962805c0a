# -*- coding: utf-8 -*-
"""plugins/plugin_utils/_render.py: vllm serve flags, shell quoting and the process list of the render plan.

The quoting tests run the quoted text through a real shell: what bash makes of the rendered line must be
what the render plan (expand / engine_processes) says will run."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import (
    engine_processes, engine_wait_argv, expand, jinja_int, launcher_argv, local_urls, master_wait, peer_urls,
    prefill_restarts, restart_reasons, serve_flag_pairs, serve_lines, shell_dq, start_log_offset, valued_flags)


def bash(script, env=None):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                          env=env or {"PATH": "/usr/bin:/bin"}).stdout


def bash_dq(value, variables):
    """What bash makes of `export X="<shell_dq(value)>"` after the given shell variables are set."""
    assigns = "".join("%s=%s\n" % (k, shlex.quote(v)) for k, v in variables.items() if not k.isdigit())
    positional = [variables[str(i)] for i in range(1, 10) if str(i) in variables]
    args = " ".join(shlex.quote(p) for p in positional)
    return bash('%sset -- %s\nexport X="%s"\nprintf %%s "$X"' % (assigns, args, shell_dq(value)))


# --------------------------------------------------------------------------
# serve flags
# --------------------------------------------------------------------------

FLAGS = {
    "enable-expert-parallel": True,
    "enforce-eager": False,
    "quantization": None,
    "seed": 1024,
    "gpu-memory-utilization": 0.95,
    "max-num-seqs": 0,
    "served-model-name": "glm-5.1",
    "speculative-config": {"num_speculative_tokens": 3, "method": "deepseek_mtp"},
    "allowed-local-media-path": ["/data/a b", "/x"],
    "chat-template": "{{ it's }} $HOME",
}


def test_serve_flag_pairs_types():
    assert serve_flag_pairs(FLAGS) == [
        ["--enable-expert-parallel", None],
        ["--seed", "1024"],
        ["--gpu-memory-utilization", "0.95"],
        ["--max-num-seqs", "0"],  # 0 is a value, not false
        ["--served-model-name", "glm-5.1"],
        ["--speculative-config", '{"num_speculative_tokens": 3, "method": "deepseek_mtp"}'],
        ["--allowed-local-media-path", '["/data/a b", "/x"]'],
        ["--chat-template", "{{ it's }} $HOME"],
    ]
    assert serve_flag_pairs(None) == [] and serve_flag_pairs({}) == []


def test_valued_flags_give_every_flag_a_value():
    flags = {"rpc_thread_num": 2, "log_monitor": False, "enable_thp": True, "log_dir": "/Var/Log", "ratio": 0.5}
    assert valued_flags(flags) == ["--rpc_thread_num", "2", "--log_monitor", "false", "--enable_thp", "true",
                                   "--log_dir", "/Var/Log", "--ratio", "0.5"]
    assert valued_flags({}) == [] and valued_flags(None) == []


def test_serve_lines_are_single_quoted_literals():
    assert serve_lines(FLAGS) == [
        "--enable-expert-parallel",
        "--seed 1024",
        "--gpu-memory-utilization 0.95",
        "--max-num-seqs 0",
        "--served-model-name glm-5.1",
        "--speculative-config '{\"num_speculative_tokens\": 3, \"method\": \"deepseek_mtp\"}'",
        "--allowed-local-media-path '[\"/data/a b\", \"/x\"]'",
        "--chat-template '{{ it'\"'\"'s }} $HOME'",
    ]


def test_serve_lines_reach_vllm_as_the_plan_says():
    # the rendered lines in a shell give exactly engine_processes' argv tail: JSON intact, $HOME not expanded
    line = " ".join(serve_lines(FLAGS))
    out = bash('for a in %s; do printf "%%s\\n" "$a"; done' % line, env={"HOME": "/root", "PATH": "/usr/bin:/bin"})
    expected = [tok for pair in serve_flag_pairs(FLAGS) for tok in pair if tok is not None]
    assert out.split("\n")[:-1] == expected
    assert json.loads(expected[expected.index("--speculative-config") + 1])["method"] == "deepseek_mtp"


# --------------------------------------------------------------------------
# shell_dq and expand
# --------------------------------------------------------------------------

VARS = {"local_ip": "10.0.0.11", "nic_name": "enp1s0", "LD_LIBRARY_PATH": "/usr/lib", "1": "0,1,2", "4": "1"}


@pytest.mark.parametrize("value,escaped", [
    ("plain", "plain"),
    ("$local_ip", "$local_ip"),
    ("${local_ip}:18481", "${local_ip}:18481"),
    ("$LD_LIBRARY_PATH:/usr/local/lib", "$LD_LIBRARY_PATH:/usr/local/lib"),
    ("$1", "$1"),
    ('say "hi"', 'say \\"hi\\"'),
    ("a\\b", "a\\\\b"),
    ("`id`", "\\`id\\`"),
    ("$(id)", "\\$(id)"),
    ("$((1+2))", "\\$((1+2))"),
    ("${X:-default}", "\\${X:-default}"),
    ("$$ $? $# $@ $*", "\\$\\$ \\$? \\$# \\$@ \\$*"),
    ("cost 5$", "cost 5\\$"),
    ("it's", "it's"),
    ("a b\tc", "a b\tc"),
])
def test_shell_dq_escapes(value, escaped):
    assert shell_dq(value) == escaped


@pytest.mark.parametrize("value", [
    "plain", "$local_ip", "${local_ip}:18481", "$LD_LIBRARY_PATH:/usr/local/lib", "$1", "dev$1x", "$12",
    'say "hi"', "a\\b", "a\\$local_ip", "`id`", "$(id)", "$((1+2))", "${X:-default}", "$$ $? $# $@ $* $-",
    "cost 5$", "it's", "$unknown_var", "${unknown}", '{"a": "$local_ip", "b": [1, 2]}', "100%", "a\nb",
])
def test_shell_dq_in_bash_gives_what_expand_says(value):
    # bugs before: "$(id)" ran id, "$$" gave a PID, "${X:-default}" gave "default", "$12" was read as
    # a variable named 12 by expand(): the script and the render plan disagreed
    variables = dict(VARS, unknown_var="", unknown="")
    expected = expand(value, VARS)
    if "$unknown_var" in value or "${unknown}" in value:
        # a name the render does not know stays literal in the plan; the shell gives its value (empty here)
        expected = expected.replace("$unknown_var", "").replace("${unknown}", "")
    assert bash_dq(value, variables) == expected


def test_expand():
    v = {"local_ip": "10.0.0.11", "1": "0,1", "nic_name": "eth0"}
    assert expand("$local_ip", v) == "10.0.0.11"
    assert expand("${local_ip}:18481", v) == "10.0.0.11:18481"
    assert expand("$nic_name,$nic_name", v) == "eth0,eth0"
    assert expand("$1", v) == "0,1"
    assert expand("$12", v) == "0,12"  # as in sh: $1 then "2"
    assert expand("${1}2", v) == "0,12"
    assert expand("$local_ipx", v) == "$local_ipx"  # another name, unknown: left as it is
    assert expand("$HOME/$local_ip", v) == "$HOME/10.0.0.11"
    assert expand("$(cmd) ${X:-y} $$", v) == "$(cmd) ${X:-y} $$"
    assert expand(1024, v) == "1024"


# --------------------------------------------------------------------------
# launcher_argv and engine_processes
# --------------------------------------------------------------------------

ME = {
    "dp_size": 2, "tp_size": 16, "dp_size_local": 1, "dp_rank_start": 1, "dp_address": "10.0.0.11",
    "dp_rpc_port": 10521, "vllm_start_port": 6700, "nic_name": "enp1s0", "business_ip": "10.0.0.12",
    "instances": [{"dp_rank": 1, "devices": list(range(16)), "api_port": 6700}],
}


def test_launcher_argv_is_the_seed_line():
    assert launcher_argv("python", ME) == [
        "python", "launch_online_dp.py", "--dp-size", "2", "--tp-size", "16", "--dp-size-local", "1",
        "--dp-rank-start", "1", "--dp-address", "10.0.0.11", "--dp-rpc-port", "10521", "--vllm-start-port", "6700"]


def test_launcher_argv_missing_key_raises():
    me = dict(ME)
    del me["dp_rpc_port"]
    with pytest.raises(KeyError, match="dp_rpc_port"):
        launcher_argv("python", me)


def test_engine_processes_expand_the_script_as_bash_would():
    env = {"HCCL_IF_IP": "$local_ip", "GLOO_SOCKET_IFNAME": "$nic_name", "ASCEND_RT_VISIBLE_DEVICES": "$1",
           "LD_LIBRARY_PATH": "$LD_LIBRARY_PATH:/usr/local/lib", "DS_WORKER_ADDR": "${local_ip}:18481",
           "A": "x", "B": "$A-y", "GOOGLE_LOGTOSTDERR": "1", "LITERAL": "$(id)"}
    procs = engine_processes(ME, env, {"enforce-eager": True, "seed": 1024, "quantization": None},
                             {1: '{"kv_role":"kv_consumer"}'}, "/data/GLM-5.1-w8a8", "0.0.0.0", "10.0.0.12:18481",
                             unset=["GOOGLE_LOGTOSTDERR", "NOT_SET"], base_env={"LD_LIBRARY_PATH": "/usr/lib"})
    assert procs == [{
        "name": "vllm serve (dp rank 1)",
        "argv": ["vllm", "serve", "/data/GLM-5.1-w8a8", "--host", "0.0.0.0", "--port", "6700",
                 "--data-parallel-size", "2", "--data-parallel-rank", "1", "--data-parallel-address", "10.0.0.11",
                 "--data-parallel-rpc-port", "10521", "--tensor-parallel-size", "16", "--enforce-eager",
                 "--seed", "1024", "--kv-transfer-config", '{"kv_role":"kv_consumer"}'],
        "env": {"A": "x", "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "B": "x-y",
                "DS_WORKER_ADDR": "10.0.0.12:18481", "GLOO_SOCKET_IFNAME": "enp1s0", "HCCL_IF_IP": "10.0.0.12",
                "LD_LIBRARY_PATH": "/usr/lib:/usr/local/lib", "LITERAL": "$(id)"},
        "started_by": "launch_online_dp.py",
    }]
    assert list(procs[0]["env"]) == sorted(procs[0]["env"])
    # the same exports through shell_dq in bash (with run_dp_template.sh's header and positional args)
    script = ["nic_name=enp1s0", "local_ip=10.0.0.12", "ds_worker_addr=10.0.0.12:18481",
              "set -- 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 6700 2 1 10.0.0.11 10521 16"]
    script += ['export %s="%s"' % (k, shell_dq(v)) for k, v in env.items()]
    script += ["unset GOOGLE_LOGTOSTDERR NOT_SET"]
    script += ['printf "%%s=%%s\\n" %s' % " ".join('%s "$%s"' % (k, k) for k in sorted(procs[0]["env"]))]
    out = bash("\n".join(script), env={"LD_LIBRARY_PATH": "/usr/lib", "PATH": "/usr/bin:/bin"})
    assert dict(line.split("=", 1) for line in out.splitlines()) == procs[0]["env"]


def test_engine_processes_one_per_instance_with_its_own_kv_json():
    me = dict(ME, dp_size_local=2, dp_rank_start=0, tp_size=8,
              instances=[{"dp_rank": 0, "devices": [0, 1], "api_port": 6700},
                         {"dp_rank": 1, "devices": [2, 3], "api_port": 6701}])
    procs = engine_processes(me, {"D": "$1@$2#$4"}, {}, {0: "kv0", 1: "kv1"}, "/m", "::", "w")
    assert [p["name"] for p in procs] == ["vllm serve (dp rank 0)", "vllm serve (dp rank 1)"]
    assert [p["env"]["D"] for p in procs] == ["0,1@6700#0", "2,3@6701#1"]
    assert [p["argv"][-1] for p in procs] == ["kv0", "kv1"]
    assert [p["argv"][p["argv"].index("--tensor-parallel-size") + 1] for p in procs] == ["8", "8"]
    with pytest.raises(KeyError):
        engine_processes(me, {}, {}, {0: "kv0"}, "/m", "::", "w")  # no kv config for dp rank 1


def test_engine_processes_read_the_kv_json_by_rank_as_the_module_returns_it():
    """kv_transfer_config's by_rank is keyed by the rank as text (a module's result is JSON)."""
    me = dict(ME, instances=[{"dp_rank": 1, "devices": [0], "api_port": 6700},
                             {"dp_rank": 10, "devices": [1], "api_port": 6701}])
    procs = engine_processes(me, {}, {}, {"1": "kv1", "10": "kv10", "0": "not mine"}, "/m", "::", "w")
    assert [p["argv"][-1] for p in procs] == ["kv1", "kv10"]
    with pytest.raises(KeyError):
        engine_processes(me, {}, {}, {"1": "kv1"}, "/m", "::", "w")


def test_engine_env_layers_common_side_extra():
    """vllm_side_env (roles/vllm) and preflight_engine_env (roles/preflight) are this one merge: later layers
    win, a key keeps its first position (run_dp_template.sh exports in this order), the inputs stay as they were."""
    from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import engine_env
    common, side, extra = {"A": "1", "B": "$nic_name"}, {"B": "eth1", "C": "3"}, {"A": "0", "D": "4"}
    got = engine_env(common, side, extra)
    assert got == {"A": "0", "B": "eth1", "C": "3", "D": "4"} and list(got) == ["A", "B", "C", "D"]
    assert common == {"A": "1", "B": "$nic_name"}
    assert engine_env(common) == common and engine_env(None, None, None) == {}


# --------------------------------------------------------------------------
# the vllm role's derived values (roles/vllm/vars/main.yml)
# --------------------------------------------------------------------------

WORKER = {"address": "10.0.0.12:18481", "what": "openYuanrong worker", "ready_file": "/w/.yr_worker_ready",
          "ready_what": "openYuanrong worker ready (dscli start)"}


@pytest.mark.parametrize("value, want", [(600, 600), ("900", 900), (" 30 ", 30), (1.9, 1), ("2.5", 2), ("x", 0),
                                         (None, 0), (True, 1)])
def test_jinja_int_is_jinjas_int_filter(value, want):
    assert jinja_int(value) == want


def test_wait_argv_of_the_dp_master_waits_for_container_and_worker_only():
    """The seed's p0 (tests/golden/a3/p0/etc/systemd/system/ascend-vllm.service, ExecStartPre wait)."""
    master = dict(ME, dp_rank_start=0)
    assert master_wait(master) is None
    assert engine_wait_argv(master, "yr_glm5", 900, "/w/vllm_log.log", {}, WORKER) == [
        "--container", "yr_glm5", "--timeout", "900", "--tcp=10.0.0.12:18481", "--what=openYuanrong worker",
        "--file=/w/.yr_worker_ready", "--file-what=openYuanrong worker ready (dscli start)"]


def test_wait_argv_of_a_member_waits_softly_for_its_dp_master():
    assert engine_wait_argv(ME, "yr_glm5", "900", "/w/vllm_log.log", {"A": "1"}, WORKER)[8:] == [
        "--soft-tcp=10.0.0.11:10521", "--soft-what=DP master RPC (--data-parallel-address)", "--soft-timeout", "600",
        "--log", "/w/vllm_log.log"]


def test_wait_argv_without_the_yuanrong_worker_and_with_the_engines_own_dp_timeout():
    got = engine_wait_argv(dict(ME, dp_rank_start="2"), "c", 30, "/l", {"VLLM_ENGINE_READY_TIMEOUT_S": "1200"}, {})
    assert got == ["--container", "c", "--timeout", "30", "--soft-tcp=10.0.0.11:10521",
                   "--soft-what=DP master RPC (--data-parallel-address)", "--soft-timeout", "1200", "--log", "/l"]
    # a value the int filter cannot read is 0, as in Jinja; a missing one is vLLM's default
    assert master_wait(ME, {"VLLM_ENGINE_READY_TIMEOUT_S": "soon"})["timeout"] == 0
    assert master_wait(ME, {"VLLM_ENGINE_READY_TIMEOUT_S": ""})["timeout"] == 0  # set, so not the default
    assert master_wait(ME, None)["timeout"] == 600
    # the dp rank as the inventory may give it: text
    assert master_wait(dict(ME, dp_rank_start="0")) is None and master_wait(dict(ME, dp_rank_start="1"))


def test_local_and_peer_urls_of_a_dp_group():
    me = dict(ME, instances=[{"api_port": 6700}, {"api_port": 6701}])
    local = local_urls(me, "10.0.0.12")
    assert local == ["http://10.0.0.12:6700", "http://10.0.0.12:6701"]
    group = {"backend_hosts": ["10.0.0.11", "10.0.0.11", "10.0.0.12", "10.0.0.12"], "api_ports": [6700, 6701, 6700, 6701]}
    assert peer_urls(group, local) == ["http://10.0.0.11:6700", "http://10.0.0.11:6701"]
    assert peer_urls(group) == ["http://10.0.0.11:6700", "http://10.0.0.11:6701"] + local


MEMBERS = {
    "p0": {"vllm_config_changed": True, "vllm_launcher_changed": False, "vllm_running": True},
    "p1": {"vllm_config_changed": False, "vllm_launcher_changed": True, "vllm_running": False},
    "p2": {"vllm_config_changed": True, "vllm_running": False},   # not in this play: not read
    "p3": {},                                                    # no decision yet: nothing to say
}


def test_restart_reasons_name_the_members_of_the_play_per_reason_in_order():
    assert restart_reasons(["p0", "p1", "p2", "p3"], MEMBERS, ["p3", "p1", "p0"], True, True) == [
        "configuration changed on p0", "launch_online_dp.py differs from the image's on p1", "not running on p1",
        "the prefill group restarts (a pair restarts together)", "a restart was asked for (vllm_restart)"]
    assert restart_reasons(["p0", "p2"], MEMBERS, ["p0", "p2"]) == ["configuration changed on p0, p2",
                                                                    "not running on p2"]
    assert restart_reasons(["p3"], MEMBERS, ["p3"]) == []


def test_prefill_restarts_only_with_a_restarted_or_whole_restarting_group():
    topo = {"p0": {"group_hosts": ["p0", "p1"]}, "p1": {"group_hosts": ["p0", "p1"]}}
    facts = {"p0": {"vllm_group_start": True}, "p1": {"vllm_group_start": True}}
    assert prefill_restarts(["p0", "p1"], facts, topo, ["p0", "p1"], ["p0", "p1", "d0"]) is True
    # a partial group (--limit) is refused and restarts nothing
    assert prefill_restarts(["p0", "p1"], facts, topo, ["p0"], ["p0", "d0"]) is False
    # a prefill play before this one restarted it (vllm_prefill, then vllm_decode): its hosts are not in this play
    assert prefill_restarts(["p0", "p1"], {"p0": {}, "p1": {"vllm_restarted": True}}, topo, ["d0"], ["d0"]) is True
    assert prefill_restarts(["p0", "p1"], {"p0": {"vllm_group_start": False}, "p1": {}}, topo, ["p0", "p1"],
                            ["p0", "p1"]) is False
    # a decision of a host outside this play is an earlier play's, not this run's start
    assert prefill_restarts(["p0", "p1"], facts, topo, ["d0"], ["p0", "p1", "d0"]) is False


def test_start_log_offset_is_the_size_the_start_printed():
    assert start_log_offset(["log offset 4096\n", ""], 7) == 4096
    assert start_log_offset([None, "x\nlog offset 12\nlog offset 99"], 7) == 12
    assert start_log_offset(["", ""], "7") == 7  # nothing printed: the role's read
    assert start_log_offset([], 0) == 0


# --------------------------------------------------------------------------
# the vllm role's shell (roles/vllm/templates and files), rendered as the role renders them and run in sh with a
# stand-in systemctl
# --------------------------------------------------------------------------

ROLE = Path(__file__).resolve().parents[4] / "roles" / "vllm"


def render_role_template(name, **variables):
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda v: shlex.quote(str(v))
    return env.get_template(name).render(**variables)


def run_with_systemctl(tmp_path, script, show, start_rc=0, args=(), shell="/bin/sh"):
    """Run script in sh (as the shell module and engine_wait's alive_command do) with systemctl, stat and
    a3_supervise stand-ins; show: what `systemctl show` prints."""
    log = tmp_path / "calls"
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    for name, body in (("systemctl", 'echo "systemctl $*" >> "$CALLS"\n[ "$1" = start ] && exit %d\n'
                                     '[ "$1" = show ] && printf "%%b" %s\nexit 0\n' % (start_rc, shlex.quote(show))),
                       ("stat", 'echo 4096\n'), ("supervise", 'echo "supervise $*" >> "$CALLS"\n')):
        (stub / name).write_text("#!/bin/sh\n" + body)
        (stub / name).chmod(0o755)
    proc = subprocess.run([shell, "-c", script, "_"] + list(args), capture_output=True, text=True, check=False,
                          env={"PATH": "%s:/usr/bin:/bin" % stub, "CALLS": str(log)}, cwd=tmp_path)
    return proc.returncode, proc.stdout, log.read_text().splitlines() if log.exists() else []


START_VARS = dict(vllm_unit="ascend-vllm.service", supervise_cmd="supervise", vllm_record="/s/r.jsonl",
                  a3_host_work_dir="/w", vllm_log_file="vllm_log.log")


def test_engine_start_of_the_dp_master_waits_for_the_unit(tmp_path):
    script = render_role_template("engine_start.sh.j2", a3_self={"dp_rank_start": 0}, **START_VARS)
    rc, out, calls = run_with_systemctl(tmp_path, script, "")
    assert (rc, out) == (0, "log offset 4096\n")
    assert calls == ["systemctl reset-failed ascend-vllm.service", "supervise deliberate --record /s/r.jsonl",
                     "systemctl start ascend-vllm.service"]
    assert run_with_systemctl(tmp_path, script, "", start_rc=5)[0] == 5  # a failed start fails the handler


def test_engine_start_of_a_member_queues_the_start_until_systemd_took_it(tmp_path):
    script = render_role_template("engine_start.sh.j2", a3_self={"dp_rank_start": "1"}, **START_VARS)
    rc, out, calls = run_with_systemctl(tmp_path, script, "activating\n")
    assert (rc, out) == (0, "log offset 4096\n")
    assert calls[2:] == ["systemctl start --no-block ascend-vllm.service",
                         "systemctl show -p ActiveState --value ascend-vllm.service"]
    assert run_with_systemctl(tmp_path, script, "activating\n", start_rc=1)[0] == 1


@pytest.mark.parametrize("active, sub, starting_or_up, not_stopped", [
    ("active", "running", 0, 0), ("activating", "start-pre", 0, 0), ("activating", "start", 0, 0),
    ("activating", "auto-restart", 1, 0), ("deactivating", "stop", 1, 0), ("failed", "failed", 1, 1),
    ("inactive", "dead", 1, 1)])
def test_the_health_waits_alive_checks(tmp_path, active, sub, starting_or_up, not_stopped):
    both = "ActiveState=%s\\nSubState=%s\\n" % (active, sub)
    script = render_role_template("unit_starting_or_up.sh.j2", vllm_unit="ascend-vllm.service")
    assert run_with_systemctl(tmp_path, script, both)[0] == starting_or_up
    script = render_role_template("unit_not_stopped.sh.j2", vllm_unit="ascend-vllm.service")
    assert run_with_systemctl(tmp_path, script, active + "\\n")[0] == not_stopped


def test_the_launcher_read_says_alive_and_same(tmp_path):
    """bash -c in the container's work directory (tasks/configure.yml), the image's launcher and its copy."""
    script = (ROLE / "files" / "launcher_state.sh").read_text()
    (tmp_path / "image.py").write_text("a")
    (tmp_path / "copy.py").write_text("a")
    (tmp_path / "other.py").write_text("b")

    def read(*args):
        return run_with_systemctl(tmp_path, script, "", args=args, shell="bash")[:2]
    assert read("image.py", "copy.py") == (0, "launcher same\n")
    (tmp_path / "launcher.pgid").write_text(str(os.getpgid(0)))  # this test's process group: alive
    assert read("image.py", "other.py") == (0, "launcher alive\n")
    assert read("image.py", "copy.py") == (0, "launcher alive\nlauncher same\n")
    (tmp_path / "launcher.pgid").write_text("")
    assert read("image.py", "missing.py") == (0, "")
