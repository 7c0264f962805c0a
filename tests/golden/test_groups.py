# -*- coding: utf-8 -*-
"""Render of a split layout: eight hosts, vllm_prefill_dp_groups=2 and vllm_decode_dp_groups=2 (two DP groups of
two nodes per side). The seed's layout (one group per side) is tests/golden/a3, unchanged (test_golden.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from golden.conftest import render

WORK = "var/lib/ascend-vllm-pd"
IPS = {"p0": "127.0.41.1", "p1": "127.0.41.2", "p2": "127.0.41.3", "p3": "127.0.41.4",
       "d0": "127.0.42.1", "d1": "127.0.42.2", "d2": "127.0.42.3", "d3": "127.0.42.4"}


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    inv = tmp_path_factory.mktemp("inv-groups")
    hosts = {side: {"hosts": {h: {"a3_business_ip": ip, "a3_nic_name": "bond0"}
                              for h, ip in IPS.items() if h[0] == side[0]}}
             for side in ("prefill", "decode")}
    hosts["all"] = {"vars": {"vllm_prefill_dp_groups": 2, "vllm_decode_dp_groups": 2}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    out = tmp_path_factory.mktemp("render-groups")
    render(str(inv), out)
    return out


def launcher(out, host):
    plan = yaml.safe_load((out / host / "plan.yml").read_text())
    proc = next(p for p in plan["processes"] if "launch_online_dp.py" in p["argv"])
    argv = proc["argv"]
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def test_each_group_has_its_own_dp_master_and_size(split):
    expect = {  # host: (dp size, rank start, DP master's address)
        "p0": ("2", "0", IPS["p0"]), "p1": ("2", "1", IPS["p0"]),
        "p2": ("2", "0", IPS["p2"]), "p3": ("2", "1", IPS["p2"]),
        "d0": ("2", "0", IPS["d0"]), "d1": ("2", "1", IPS["d0"]),
        "d2": ("2", "0", IPS["d2"]), "d3": ("2", "1", IPS["d2"]),
    }
    for host, (size, start, master) in expect.items():
        got = launcher(split, host)
        assert (got["--dp-size"], got["--dp-rank-start"], got["--dp-address"], got["--dp-rpc-port"]) == \
            (size, start, master, "10521"), host
    # run_dp_template.sh passes the launcher's positional values to vllm serve
    script = (split / "p3" / WORK / "run_dp_template.sh").read_text()
    assert '--data-parallel-address "$5"' in script and '--data-parallel-size "$3"' in script
    plan = yaml.safe_load((split / "p3" / "plan.yml").read_text())
    serve = next(p for p in plan["processes"] if p["argv"][:2] == ["vllm", "serve"])["argv"]
    assert serve[serve.index("--data-parallel-address") + 1] == IPS["p2"]
    assert serve[serve.index("--data-parallel-size") + 1] == "2"
    assert serve[serve.index("--data-parallel-rank") + 1] == "1"


def test_the_proxy_lists_every_instance_of_every_group(split):
    proxy = (split / "p0" / WORK / "proxy.sh").read_text()
    assert ("--prefiller-hosts %s --prefiller-ports 6700 6700 6700 6700"
            % " ".join(IPS[h] for h in ("p0", "p1", "p2", "p3"))) in proxy
    assert ("--decoder-hosts %s --decoder-ports 6700 6700 6700 6700"
            % " ".join(IPS[h] for h in ("d0", "d1", "d2", "d3"))) in proxy


def test_kv_transfer_blocks_describe_one_group_per_side_and_ports_stay_distinct(split):
    ports = {}
    for host in IPS:
        (path,) = (split / host / WORK).glob("kv_transfer_config_dp*.json")
        config = json.loads(path.read_text())
        mooncake = config["kv_connector_extra_config"]["connectors"][0]
        assert mooncake["kv_connector_extra_config"]["prefill"] == {"dp_size": 2, "tp_size": 16}
        assert mooncake["kv_connector_extra_config"]["decode"] == {"dp_size": 2, "tp_size": 16}
        ports[host] = (path.name, mooncake["kv_port"])
    # rank numbers restart per group; the second group's kv_port starts after the first group's range
    assert ports["p2"] == ("kv_transfer_config_dp0.json", "30032")
    assert ports["p3"] == ("kv_transfer_config_dp1.json", "30032")
    assert ports["p0"] == ("kv_transfer_config_dp0.json", "30000")
    assert ports["d2"] == ("kv_transfer_config_dp0.json", "30132")


def test_canary_peers_are_the_group_only(split):
    canary = json.loads((split / "p2" / WORK / "supervise" / "ascend-vllm.service.canary.json").read_text())
    assert canary["peers"] == ["http://%s:6700" % IPS["p3"]]
    canary = json.loads((split / "d1" / WORK / "supervise" / "ascend-vllm.service.canary.json").read_text())
    assert canary["peers"] == ["http://%s:6700" % IPS["d0"]]


def test_monitoring_counts_ranks_per_group(split):
    base = split / "p0" / "etc/prometheus/file_sd/ascend-vllm-pd"
    rules = yaml.safe_load((base / "ascend-vllm-pd.rules.yml").read_text())
    expr = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "A3DPGroupIncomplete")["expr"]
    assert 'sum by (cluster, side, dp_group) (up{component="vllm", side="prefill"}) < 2' in expr
    assert 'sum by (cluster, side, dp_group) (up{component="vllm", side="decode"}) < 2' in expr
    targets = json.loads((base / "vllm.json").read_text())
    assert {(t["labels"]["host"], t["labels"]["dp_group"], t["labels"]["dp_rank"]) for t in targets} == {
        ("p0", "0", "0"), ("p1", "0", "1"), ("p2", "1", "0"), ("p3", "1", "1"),
        ("d0", "0", "0"), ("d1", "0", "1"), ("d2", "1", "0"), ("d3", "1", "1")}
