# -*- coding: utf-8 -*-
"""Rendering inventories/a3 reproduces the seed: its values as transcribed in tests/golden/seed_values.yml."""
from __future__ import annotations

import json
import re
import shlex

import yaml

SIDE_HOSTS = {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}
PLACEHOLDER_IP = {"p0": "<节点0业务IP>", "p1": "<节点1业务IP>", "d0": "<节点2业务IP>", "d1": "<节点3业务IP>"}
SEED_VARS = {"P0_IP": PLACEHOLDER_IP["p0"], "P1_IP": PLACEHOLDER_IP["p1"], "D0_IP": PLACEHOLDER_IP["d0"],
             "D1_IP": PLACEHOLDER_IP["d1"], "ETCD_IP": PLACEHOLDER_IP["p0"], "ETCD_PORT": "2379",
             "ETCD_PEER_PORT": "2380", "WORKER_PORT": "18481", "SHM_SIZE": "512000", "NODE_TIMEOUT": "20",
             "NODE_DEAD_TIMEOUT": "30", "LIVENESS_PATH": "/workspace/liveness"}
WORK = "var/lib/ascend-vllm-pd"


def expand(value, variables):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), value)


def our_script(path):
    """(header vars, env, unset, model, flags) of a rendered run_dp_template.sh."""
    text = path.read_text()
    header = dict(re.findall(r"^(nic_name|local_ip|ds_worker_addr)=(.*)$", text, re.M))
    header = {k: shlex.split(v)[0] for k, v in header.items()}
    env = {}
    for line in re.findall(r"^export (.*)$", text, re.M):
        key, _unused, value = shlex.split(line)[0].partition("=")
        env[key] = value
    unset = re.search(r"^unset (.*)$", text, re.M).group(1).split()
    serve = text[text.index("exec vllm serve"):].replace("\\\n", " ")
    toks = shlex.split(serve)
    return header, env, unset, toks[3], toks[4:]


def plan(rendered, host):
    return yaml.safe_load((rendered / host / "plan.yml").read_text())


def test_engine_env_and_flags_match_the_seed(rendered_a3, seed):
    from golden.seed import parse_flags
    for side, hosts in SIDE_HOSTS.items():
        s_env, s_unset, s_model, s_flags = seed.engine_script(side)
        for rank, host in enumerate(hosts):
            header, env, unset, model, toks = our_script(rendered_a3 / host / WORK / "run_dp_template.sh")
            variables = dict(header, **{str(i): "$%d" % i for i in range(1, 8)})
            assert {k: expand(v, variables) for k, v in env.items()} == \
                {k: expand(v, dict(variables, local_ip=header["local_ip"])) for k, v in s_env.items()}, host
            assert unset == s_unset and model == s_model
            flags = parse_flags(toks)
            ours_kv = json.loads((rendered_a3 / host / WORK / ("kv_transfer_config_dp%d.json" % rank)).read_text())
            seed_kv = json.loads(s_flags["kv-transfer-config"].replace("$4", str(rank)))
            assert flags.pop("kv-transfer-config") == '$(cat kv_transfer_config_dp$4.json)'  # shlex drops the inner quotes
            assert ours_kv == seed_kv, host
            s_flags_clean = {k: v for k, v in s_flags.items() if k != "kv-transfer-config"}
            assert set(flags) == set(s_flags_clean), (host, set(flags) ^ set(s_flags_clean))
            for key, value in s_flags_clean.items():
                if isinstance(value, str) and value.lstrip().startswith("{"):
                    assert json.loads(flags[key]) == json.loads(value), (host, key)
                else:
                    assert flags[key] == value, (host, key)


def test_launcher_arguments_match_the_seed(rendered_a3, seed):
    seed_args = seed.launcher_args()
    for node, host in enumerate(["p0", "p1", "d0", "d1"]):
        launcher = next(p for p in plan(rendered_a3, host)["processes"] if p["name"].startswith("launch_online_dp"))
        argv = launcher["argv"]
        assert argv[:2] == ["python", "launch_online_dp.py"]
        expected = {k: expand(v, SEED_VARS) for k, v in seed_args[node].items()}
        from golden.seed import parse_flags
        assert parse_flags(argv[2:]) == expected, host
        assert launcher["cwd"] == "/workspace/glm5-a3-large-ep"


def test_proxy_matches_the_seed(rendered_a3, seed):
    s_args, s_unset = seed.proxy_args()
    script = (rendered_a3 / "p0" / WORK / "proxy.sh").read_text()
    assert re.findall(r"^unset (\w+)$", script, re.M) == s_unset
    toks = shlex.split(script[script.index("exec "):])[1:]
    # Deliberate departure: the seed's script runs inside the collection's wrapper (README "Self-healing"),
    # which takes the seed's arguments unchanged and its own --a3-* options.
    assert toks[:2] == ["python", "a3_proxy.py"]
    ours, key = {}, None
    for tok in toks[2:]:
        if tok.startswith("--"):
            key = tok[2:]
            ours.setdefault(key, [])
        else:
            ours[key].append(tok)
    assert {k: v for k, v in ours.items() if not k.startswith("a3-")} == \
        {k: [expand(v, SEED_VARS) for v in vs] for k, vs in s_args.items()}
    assert sorted(k for k in ours if k.startswith("a3-")) == [
        "a3-admin-host", "a3-admin-port", "a3-ds-worker", "a3-etcd", "a3-fail-threshold", "a3-first-byte-timeout",
        "a3-probe-interval", "a3-probe-timeout", "a3-retry-after"]
    # the admin paths (drain, /instances/*, /metrics) only on the proxy host's loopback
    assert (ours["a3-admin-host"], ours["a3-admin-port"]) == (["127.0.0.1"], ["8089"])
    # the datasystem workers the wrapper reports on (a3_proxy_ds_worker_registered): one per node, in etcd on p0
    assert ours["a3-ds-worker"] == ["<节点%d业务IP>:18481" % i for i in range(4)]
    assert ours["a3-etcd"] == ["<节点0业务IP>:2379"]
    for host in ("p1", "d0", "d1"):
        assert not (rendered_a3 / host / WORK / "proxy.sh").exists()


# Deliberate departures from the seed, each with its reason (README "Where we depart from the seed").
ETCD_DEPARTURES = {"data-dir": "/var/lib/ascend-etcd"}  # the seed's /tmp/etcd-data is lost on reboot


def test_etcd_matches_the_seed(rendered_a3, seed):
    from golden.seed import parse_flags
    s = {k: expand(v, SEED_VARS) for k, v in seed.etcd_args().items()}
    etcd = next(p for p in plan(rendered_a3, "p0")["processes"] if p["name"].startswith("etcd"))
    ours = parse_flags(etcd["argv"][1:])
    assert {k: v for k, v in ours.items() if k not in ETCD_DEPARTURES} == \
        {k: v for k, v in s.items() if k not in ETCD_DEPARTURES}
    assert ours["data-dir"] == ETCD_DEPARTURES["data-dir"] != s["data-dir"]
    unit = (rendered_a3 / "p0" / "etc/systemd/system/ascend-etcd.service").read_text()
    assert "ExecStart=" + " ".join(shlex.quote(a) for a in etcd["argv"]) in unit
    for host in ("p1", "d0", "d1"):
        assert not any(p["name"].startswith("etcd") for p in plan(rendered_a3, host)["processes"])


def test_dscli_matches_the_seed(rendered_a3, seed):
    from golden.seed import parse_flags
    numa, s_flags = seed.dscli_args()
    for host in ("p0", "p1", "d0", "d1"):
        worker = next(p for p in plan(rendered_a3, host)["processes"] if "datasystem" in p["name"])
        argv = worker["argv"]
        w = argv.index("-w")
        before = argv[2:w]
        # -t (wait for ready) is added before -w, raised for the shared memory size (openYuanrong datasystem's
        # dscli start: -t SECONDS waits until the worker is ready, default 90)
        assert before[:len(numa)] == numa and before[len(numa)] == "-t" and int(before[len(numa) + 1]) >= 90
        variables = dict(SEED_VARS, HOST_IP=PLACEHOLDER_IP[host])
        assert parse_flags(argv[w + 1:]) == {k: expand(v, variables) for k, v in s_flags.items()}, host
        header, env, *_unused = our_script(rendered_a3 / host / WORK / "run_dp_template.sh")
        assert expand(env["DS_WORKER_ADDR"], header) == parse_flags(argv[w + 1:])["worker_address"]


def test_container_matches_start_docker_sh(rendered_a3, seed):
    s = seed.docker_run()
    for host in ("p0", "p1", "d0", "d1"):
        c = plan(rendered_a3, host)["container"]
        assert c["name"] == "yr_glm5" and c["image"] == "quay.io/ascend/vllm-ascend:v0.18.0-a3"
        assert c["shm_size"] == "500g" and c["privileged"] is True and s["privileged"] == "true"
        assert c["network_mode"] == s["net"] == "host"
        assert c["working_dir"] == s["workdir"] and c["entrypoint"] == [s["entrypoint"]]
        assert c["interactive"] and c["tty"] and s["flags"] == ["-it", "-d"]
        assert c["devices"] == s["devices"]
        tz = "/usr/share/zoneinfo/Asia/Shanghai:/etc/localtime"
        assert [v for v in s["volumes"] if v != tz] == c["volumes"][:len(s["volumes"]) - 1]
        assert tz + ":ro" in c["volumes"]
        assert c["env"] == {}  # proxy variables only when set on the node; none while rendering


def test_sysctl_and_pip_pins_match_the_seed(rendered_a3, seed):
    for host in ("p0", "d1"):
        p = plan(rendered_a3, host)
        assert p["sysctl"] == {"vm.nr_hugepages": seed.hugepages_pages("2M")}
        assert (rendered_a3 / host / "etc/sysctl.d/90-ascend-hugepages.conf").read_text() == "vm.nr_hugepages=256000\n"
        # the seed's flags, and --no-compile (patches_pip_compile: false, the collection's one addition)
        pins = dict(re.match(r"pip install ([\w_]+)==([\d.]+) --no-deps --force-reinstall --no-compile$", c).groups()
                    for c in p["patches"]["pip_install"])
        assert pins == seed.pip_pins()


def test_one_terabyte_tip_is_one_variable(tmp_path):
    """The seed's 1T tip: one variable, the dependents follow (shm 1024g, yuanrong 1024 GiB in MB)."""
    import subprocess
    from helpers import ROOT, venv_bin
    proc = subprocess.run([venv_bin("ansible-playbook"), "playbooks/render.yml", "-i", "inventories/a3",
                           "-e", "render_dir=%s" % tmp_path, "-e", "hugepages_target=1T", "--limit", "localhost,p0"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    p = plan(tmp_path, "p0")
    assert p["container"]["shm_size"] == "1024g"
    assert p["sysctl"] == {"vm.nr_hugepages": 524288}
    worker = next(x for x in p["processes"] if "datasystem" in x["name"])
    assert worker["argv"][worker["argv"].index("--shared_memory_size_mb") + 1] == "1048576"
