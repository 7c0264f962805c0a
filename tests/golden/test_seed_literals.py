# -*- coding: utf-8 -*-
"""The seed's values, written out literally in this file, on the render of inventories/a3 and on its topology.

The golden tree tests/golden/a3 is made by the very render test_golden.py compares it with: it catches a change,
not a wrong value (tests/golden/update.sh would commit a wrong render as readily as a right one). test_seed.py
compares the render with seed_values.yml, a transcription read from a file. Here the values of the seed (the
procedure "在 Atlas 800 A3 上使用 PD 分离方式部署 GLM-5.1-w8a8": four A3 nodes P0 P1 D0 D1, one DP group per side of
dp size 2 and tp size 16, ports 6700/10521/30000/30100/18481/2379/8088, the MultiConnector of MooncakeConnectorV1
and AscendStoreConnector with the yuanrong backend, etcd and the proxy on P0) are literals of the test, checked on
both the committed golden tree and a fresh render, and on what derive() makes of inventories/a3 with the roles'
defaults. Nothing here is read from the code, from seed_values.yml or from the golden files' own expectations.

The business IPs and the NIC are the inventory's placeholders (<节点0业务IP> ...), as the seed writes them.
"""
from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "a3"
ROOT = Path(__file__).resolve().parents[2]
WORK = "var/lib/ascend-vllm-pd"

P0_IP, P1_IP, D0_IP, D1_IP = "<节点0业务IP>", "<节点1业务IP>", "<节点2业务IP>", "<节点3业务IP>"
IP = {"p0": P0_IP, "p1": P1_IP, "d0": D0_IP, "d1": D1_IP}
NIC = "<业务网卡名>"


@pytest.fixture(params=["golden tree", "fresh render"])
def tree(request):
    """The committed golden files, then a render made now (test_golden.py holds the two equal)."""
    if request.param == "golden tree":
        return GOLDEN
    return request.getfixturevalue("rendered_a3")


def read(tree, host, rel):
    return (tree / host / rel).read_text(encoding="utf-8")


def flags(tokens):
    """['--a', 'x', '--b', '--c', 'y', '--c', 'z'] -> {'a': ['x'], 'b': [], 'c': ['y', 'z']}: every value after a
    flag, in order (a repeated flag collects them all)."""
    out, name = {}, None
    for token in tokens:
        if token.startswith("--"):
            name = token[2:]
            out.setdefault(name, [])
        else:
            assert name is not None, "a value before any flag in %s" % tokens
            out[name].append(token)
    return out


def single(parsed):
    """{'a': ['x'], 'b': []} -> {'a': 'x', 'b': True}; a flag with more values (or given twice) fails."""
    out = {}
    for name, values in parsed.items():
        assert len(values) <= 1, "--%s has more than one value: %s" % (name, values)
        out[name] = values[0] if values else True
    return out


# ----------------------------------------------------------------------------- the engines (seed step 5)

# run_dp_template.sh: launch_online_dp.py passes DEVICES PORT DP_SIZE DP_RANK DP_ADDRESS DP_RPC_PORT TP_SIZE as $1..$7
SERVE_PREFILL = {
    "host": "0.0.0.0", "port": "$2", "data-parallel-size": "$3", "data-parallel-rank": "$4",
    "data-parallel-address": "$5", "data-parallel-rpc-port": "$6", "tensor-parallel-size": "$7",
    "enable-expert-parallel": True, "seed": "1024", "served-model-name": "glm-5.1", "max-model-len": "202752",
    "max-num-batched-tokens": "4096", "trust-remote-code": True, "max-num-seqs": "64", "quantization": "ascend",
    "gpu-memory-utilization": "0.95", "enforce-eager": True, "enable-auto-tool-choice": True,
    "tool-call-parser": "glm47", "reasoning-parser": "glm45",
}
SERVE_DECODE = {
    "host": "0.0.0.0", "port": "$2", "data-parallel-size": "$3", "data-parallel-rank": "$4",
    "data-parallel-address": "$5", "data-parallel-rpc-port": "$6", "tensor-parallel-size": "$7",
    "enable-expert-parallel": True, "seed": "1024", "served-model-name": "glm-5.1", "max-model-len": "202752",
    "max-num-batched-tokens": "32", "trust-remote-code": True, "max-num-seqs": "8", "gpu-memory-utilization": "0.92",
    "async-scheduling": True, "quantization": "ascend", "enable-auto-tool-choice": True, "tool-call-parser": "glm47",
    "reasoning-parser": "glm45",
}
SERVE_JSON_BOTH = {
    "speculative-config": {"num_speculative_tokens": 3, "method": "deepseek_mtp"},
    "additional-config": {"enable_npugraph_ex": True, "fuse_muls_add": True, "multistream_overlap_shared_expert": True,
                          "recompute_scheduler_enable": True},
}
SERVE_JSON_DECODE = {
    "compilation-config": {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [4, 8, 12, 16, 20, 24, 28, 32]},
}
ENV_BOTH = {
    "VLLM_ASCEND_ENABLE_FUSED_MC2": "1", "HCCL_OP_EXPANSION_MODE": "AIV", "HCCL_IF_IP": "$local_ip",
    "GLOO_SOCKET_IFNAME": "$nic_name", "TP_SOCKET_IFNAME": "$nic_name", "HCCL_SOCKET_IFNAME": "$nic_name",
    "OMP_PROC_BIND": "false", "OMP_NUM_THREADS": "10", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
    "HCCL_BUFFSIZE": "256", "ASCEND_AGGREGATE_ENABLE": "1", "ACL_OP_INIT_MODE": "1", "ASCEND_A3_ENABLE": "1",
    "VLLM_NIXL_ABORT_REQUEST_TIMEOUT": "300000", "ASCEND_RT_VISIBLE_DEVICES": "$1",
    "LD_LIBRARY_PATH": "$LD_LIBRARY_PATH:/usr/local/lib", "PYTHONHASHSEED": "0",
}
ENV_PREFILL = dict(ENV_BOTH, VLLM_ASCEND_ENABLE_FLASHCOMM1="1")
ENV_DECODE = dict(ENV_BOTH, ASCEND_TRANSPORT_PRINT="1", TASK_QUEUE_ENABLE="1", VLLM_ASCEND_ENABLE_MLAPO="1")
SIDE = {"p0": "prefill", "p1": "prefill", "d0": "decode", "d1": "decode"}


def engine_script(text):
    """(header assignments, exports, unset names, vllm serve tokens) of a rendered run_dp_template.sh."""
    header = {k: shlex.split(v)[0] for k, v in re.findall(r"^(nic_name|local_ip|ds_worker_addr)=(.*)$", text, re.M)}
    exports = dict(shlex.split(line)[0].split("=", 1) for line in re.findall(r"^export (.*)$", text, re.M))
    (unset,) = re.findall(r"^unset (.*)$", text, re.M)
    serve = shlex.split(text[text.index("exec vllm serve"):].replace("\\\n", " "))
    return header, exports, unset.split(), serve


@pytest.mark.parametrize("host", ["p0", "p1", "d0", "d1"])
def test_the_engines_run_the_seeds_vllm_serve(tree, host):
    header, exports, unset, serve = engine_script(read(tree, host, WORK + "/run_dp_template.sh"))
    assert serve[:4] == ["exec", "vllm", "serve", "/data/GLM-5.1-w8a8"]
    parsed = single(flags(serve[4:]))
    json_flags = dict(SERVE_JSON_BOTH, **(SERVE_JSON_DECODE if SIDE[host] == "decode" else {}))
    for name, value in json_flags.items():
        assert json.loads(parsed.pop(name)) == value, (host, name)
    # the JSON of its dp rank ($4), in a file beside the script (shlex drops the inner quotes)
    assert parsed.pop("kv-transfer-config") == "$(cat kv_transfer_config_dp$4.json)"
    assert parsed == (SERVE_PREFILL if SIDE[host] == "prefill" else SERVE_DECODE)
    # the environment: the seed's exports; DS_WORKER_ADDR is ${local_ip}:18481, through the header
    assert header == {"nic_name": NIC, "local_ip": IP[host], "ds_worker_addr": IP[host] + ":18481"}
    assert exports.pop("DS_WORKER_ADDR") == "$ds_worker_addr"
    assert exports == (ENV_PREFILL if SIDE[host] == "prefill" else ENV_DECODE)
    assert unset == ["GOOGLE_LOGTOSTDERR", "GOOGLE_ALSOLOGTOSTDERR"]


# The kv-transfer-config of each dp rank: MultiConnector over MooncakeConnectorV1 (kv_port 30000 prefill, 30100
# decode; the dp/tp blocks of both sides: dp 2, tp 16) and AscendStoreConnector with the yuanrong backend.
KV_PREFILL_DP0 = {
    "kv_connector": "MultiConnector", "kv_role": "kv_producer", "engine_id": "0",
    "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": "30000",
         "kv_connector_module_path": "vllm_ascend.distributed.mooncake_connector",
         "kv_connector_extra_config": {"use_ascend_direct": True, "prefill": {"dp_size": 2, "tp_size": 16},
                                       "decode": {"dp_size": 2, "tp_size": 16}}},
        {"kv_connector": "AscendStoreConnector", "kv_role": "kv_producer",
         "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}},
    ]},
}
KV_DECODE_DP0 = {
    "kv_connector": "MultiConnector", "kv_role": "kv_consumer",
    "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer", "kv_port": "30100",
         "kv_connector_module_path": "vllm_ascend.distributed.mooncake_connector",
         "kv_connector_extra_config": {"use_ascend_direct": True, "prefill": {"dp_size": 2, "tp_size": 16},
                                       "decode": {"dp_size": 2, "tp_size": 16}}},
        {"kv_connector": "AscendStoreConnector", "kv_role": "kv_consumer",
         "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}},
    ]},
}
# The seed's prefill writes lookup_rpc_port "0" on both nodes, its decode "$4" (the dp rank): "1" on D1.
KV_DECODE_DP1 = copy.deepcopy(KV_DECODE_DP0)
KV_DECODE_DP1["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]["lookup_rpc_port"] = "1"
KV = {("p0", 0): KV_PREFILL_DP0, ("p1", 1): KV_PREFILL_DP0, ("d0", 0): KV_DECODE_DP0, ("d1", 1): KV_DECODE_DP1}


@pytest.mark.parametrize("host, rank", sorted(KV))
def test_the_kv_transfer_config_of_each_dp_rank_is_the_seeds(tree, host, rank):
    files = sorted(p.name for p in (tree / host / WORK).glob("kv_transfer_config_dp*.json"))
    assert files == ["kv_transfer_config_dp%d.json" % rank]  # one dp rank per node
    assert json.loads(read(tree, host, WORK + "/" + files[0])) == KV[(host, rank)]


# The four `python launch_online_dp.py` lines: dp 2 and tp 16 per side, one rank per node, rank starts 0 and 1,
# the DP master's business IP (P0 for prefill, D0 for decode), DP RPC port 10521, API port 6700.
LAUNCHER = {
    "p0": {"dp-size": "2", "tp-size": "16", "dp-size-local": "1", "dp-rank-start": "0", "dp-address": P0_IP,
           "dp-rpc-port": "10521", "vllm-start-port": "6700"},
    "p1": {"dp-size": "2", "tp-size": "16", "dp-size-local": "1", "dp-rank-start": "1", "dp-address": P0_IP,
           "dp-rpc-port": "10521", "vllm-start-port": "6700"},
    "d0": {"dp-size": "2", "tp-size": "16", "dp-size-local": "1", "dp-rank-start": "0", "dp-address": D0_IP,
           "dp-rpc-port": "10521", "vllm-start-port": "6700"},
    "d1": {"dp-size": "2", "tp-size": "16", "dp-size-local": "1", "dp-rank-start": "1", "dp-address": D0_IP,
           "dp-rpc-port": "10521", "vllm-start-port": "6700"},
}


@pytest.mark.parametrize("host", sorted(LAUNCHER))
def test_the_launcher_lines_are_the_seeds(tree, host):
    (line,) = [ln for ln in read(tree, host, WORK + "/start_vllm.sh").splitlines() if "launch_online_dp.py --" in ln]
    tokens = shlex.split(line.split(">>")[0])
    assert tokens[:3] == ["setsid", "python", "launch_online_dp.py"]
    assert single(flags(tokens[3:])) == LAUNCHER[host]


# ----------------------------------------------------------------------------- the proxy (seed proxy.sh)

def test_the_proxy_on_p0_has_the_seeds_backends(tree):
    text = read(tree, "p0", WORK + "/proxy.sh")
    assert re.findall(r"^unset (\S+)$", text, re.M) == ["ftp_proxy", "https_proxy", "http_proxy"]
    (line,) = re.findall(r"^exec (.*)$", text, re.M)
    tokens = shlex.split(line)
    assert tokens[:2] == ["python", "a3_proxy.py"]
    parsed = flags(tokens[2:])
    names = ("port", "host", "prefiller-hosts", "prefiller-ports", "decoder-hosts", "decoder-ports")
    seed = {name: parsed.pop(name) for name in names}
    assert seed == {"port": ["8088"], "host": ["0.0.0.0"], "prefiller-hosts": [P0_IP, P1_IP],
                    "prefiller-ports": ["6700", "6700"], "decoder-hosts": [D0_IP, D1_IP],
                    "decoder-ports": ["6700", "6700"]}
    # the rest is the wrapper's own: etcd on P0 and the four datasystem workers it reports on
    assert all(name.startswith("a3-") for name in parsed), parsed
    assert parsed["a3-etcd"] == [P0_IP + ":2379"]
    assert parsed["a3-ds-worker"] == [P0_IP + ":18481", P1_IP + ":18481", D0_IP + ":18481", D1_IP + ":18481"]
    for host in ("p1", "d0", "d1"):  # the proxy runs on the first prefill node only
        assert not (tree / host / WORK / "proxy.sh").exists(), host


# ----------------------------------------------------------------------------- etcd and the workers (seed steps 3-4)

def test_etcd_runs_on_p0_with_the_seeds_urls(tree):
    unit = read(tree, "p0", "etc/systemd/system/ascend-etcd.service")
    (line,) = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    parsed = single(flags(shlex.split(line)[1:]))
    parsed.pop("data-dir")  # the seed's /tmp/etcd-data would not survive a reboot (test_seed.py: a departure)
    assert parsed == {"name": "etcd-single", "listen-client-urls": "http://0.0.0.0:2379",
                      "advertise-client-urls": "http://%s:2379" % P0_IP, "listen-peer-urls": "http://0.0.0.0:2380",
                      "initial-advertise-peer-urls": "http://%s:2380" % P0_IP,
                      "initial-cluster": "etcd-single=http://%s:2380" % P0_IP}
    for host in ("p1", "d0", "d1"):
        assert not (tree / host / "etc/systemd/system/ascend-etcd.service").exists(), host


@pytest.mark.parametrize("host", ["p0", "p1", "d0", "d1"])
def test_each_node_runs_a_datasystem_worker_on_its_business_ip_with_etcd_on_p0(tree, host):
    (line,) = re.findall(r"^exec (dscli start .*)$", read(tree, host, WORK + "/run_yr_worker.sh"), re.M)
    tokens = shlex.split(line)
    assert tokens[2:4] == ["--interleave", "0-7"] and "-w" in tokens
    assert single(flags(tokens[tokens.index("-w") + 1:])) == {
        "worker_address": IP[host] + ":18481", "etcd_address": P0_IP + ":2379", "shared_memory_size_mb": "512000",
        "node_timeout_s": "20", "node_dead_timeout_s": "30", "arena_per_tenant": "1", "enable_huge_tlb": "true",
        "liveness_check_path": "/workspace/liveness"}


@pytest.mark.parametrize("host", ["p0", "p1", "d0", "d1"])
def test_each_node_reserves_the_seeds_2m_hugepages(tree, host):
    assert read(tree, host, "etc/sysctl.d/90-ascend-hugepages.conf").split() == ["vm.nr_hugepages=256000"]


# ----------------------------------------------------------------------------- the topology of inventories/a3

@pytest.fixture(scope="module")
def topology():
    """derive() of inventories/a3 as Ansible reads it (hostvars of every host), with the roles' defaults."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults
    from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars
    from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import derive

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(ROOT / "inventories" / "a3")])
    variables = VariableManager(loader=loader, inventory=inventory)
    hostvars = {h.name: variables.get_vars(host=h, include_hostvars=False) for h in inventory.get_hosts()}
    groups = {name: [h.name for h in group.get_hosts()] for name, group in inventory.groups.items()}
    return derive(from_hostvars(hostvars, groups, role_defaults()))


def test_the_seed_topology_one_dp_group_per_side(topology):
    sides = topology["sides"]
    assert sides["prefill"]["hosts"] == ["p0", "p1"] and sides["decode"]["hosts"] == ["d0", "d1"]
    for side, role, master in (("prefill", "kv_producer", P0_IP), ("decode", "kv_consumer", D0_IP)):
        s = sides[side]
        assert (s["dp_size"], s["tp_size"], s["dp_size_local"], s["kv_role"]) == (2, 16, 1, role), side
        assert s["dp_address"] == master and len(s["groups"]) == 1, side
    assert topology["mooncake"] == {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    # etcd and the proxy on P0, the first prefill node
    assert (topology["etcd_host"], topology["etcd_address"]) == ("p0", P0_IP + ":2379")
    assert (topology["proxy_host"], topology["proxy_ip"]) == ("p0", P0_IP)
    assert sides["prefill"]["backend_hosts"] == [P0_IP, P1_IP] and sides["prefill"]["api_ports"] == [6700, 6700]
    assert sides["decode"]["backend_hosts"] == [D0_IP, D1_IP] and sides["decode"]["api_ports"] == [6700, 6700]


# host: (dp rank start, dp address, kv ports of its rank, lookup_rpc_port, etcd host, proxy host). The dp
# address is the first node of the side (P0's business IP for prefill, D0's for decode); Mooncake listens on
# kv_port + rank x tp (30000 / 30100 + rank x 16).
HOSTS = {
    "p0": (0, P0_IP, [30000, 30015], 0, True, True),
    "p1": (1, P0_IP, [30016, 30031], 0, False, False),
    "d0": (0, D0_IP, [30100, 30115], 0, False, False),
    "d1": (1, D0_IP, [30116, 30131], 1, False, False),
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_the_seed_topology_of_each_node(topology, host):
    start, address, kv_ports, lookup, etcd, proxy = HOSTS[host]
    me = topology["hosts"][host]
    assert (me["side"], me["business_ip"], me["nic_name"]) == (SIDE[host], IP[host], NIC)
    assert (me["dp_size"], me["dp_size_local"], me["dp_rank_start"], me["dp_address"], me["dp_rpc_port"],
            me["tp_size"], me["vllm_start_port"]) == (2, 1, start, address, 10521, 16, 6700)
    assert me["instances"] == [{"local_rank": 0, "dp_rank": start, "api_port": 6700, "devices": list(range(16)),
                                "kv_ports": kv_ports, "lookup_rpc_port": lookup}]
    assert me["ds_worker_addr"] == IP[host] + ":18481"
    assert (me["is_etcd_host"], me["is_proxy_host"]) == (etcd, proxy)
