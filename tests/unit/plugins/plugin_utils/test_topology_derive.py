# -*- coding: utf-8 -*-
"""_topology.derive, host_ports and backends pinned whole: the seed layout (2 prefill + 2 decode nodes, 16 NPUs each)
and a layout where every value that could be mixed up differs (two prefill DP groups of two instances per node, an
etcd and a proxy host moved off the first prefill host, a dp address override, per-host ports), with literal
expected values."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T

from test_topology import BASE_HOST, inventory

SIXTEEN = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
LOW, HIGH = [0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]


def inst(local_rank, dp_rank, api_port, devices, kv_ports, lookup):
    return {"local_rank": local_rank, "dp_rank": dp_rank, "api_port": api_port, "devices": devices,
            "kv_ports": kv_ports, "lookup_rpc_port": lookup}


def host(side, index, group, group_hosts, ip, nic, dp_size, local, start, dp_address, rpc, tp, kv_port, api, instances,
         worker, etcd=False, proxy=False):
    return {"side": side, "index": index, "group": group, "group_hosts": group_hosts, "business_ip": ip,
            "nic_name": nic, "dp_size": dp_size, "dp_size_local": local, "dp_rank_start": start,
            "dp_address": dp_address, "dp_rpc_port": rpc, "tp_size": tp, "kv_port": kv_port, "vllm_start_port": api,
            "instances": instances, "ds_worker_addr": worker, "is_etcd_host": etcd, "is_proxy_host": proxy}


SEED = {
    "sides": {
        "prefill": {
            "hosts": ["p0", "p1"], "ips": ["192.0.2.11", "192.0.2.12"], "api_ports": [6700, 6700], "dp_size": 2,
            "dp_size_local": 1, "tp_size": 16, "dp_address": "192.0.2.11", "kv_role": "kv_producer",
            "groups": [{"index": 0, "hosts": ["p0", "p1"], "dp_master": "p0", "dp_address": "192.0.2.11",
                        "dp_rpc_port": 10521, "dp_size": 2, "backend_hosts": ["192.0.2.11", "192.0.2.12"],
                        "api_ports": [6700, 6700]}],
            "instances": 2, "backend_hosts": ["192.0.2.11", "192.0.2.12"]},
        "decode": {
            "hosts": ["d0", "d1"], "ips": ["192.0.2.13", "192.0.2.14"], "api_ports": [6700, 6700], "dp_size": 2,
            "dp_size_local": 1, "tp_size": 16, "dp_address": "192.0.2.13", "kv_role": "kv_consumer",
            "groups": [{"index": 0, "hosts": ["d0", "d1"], "dp_master": "d0", "dp_address": "192.0.2.13",
                        "dp_rpc_port": 10521, "dp_size": 2, "backend_hosts": ["192.0.2.13", "192.0.2.14"],
                        "api_ports": [6700, 6700]}],
            "instances": 2, "backend_hosts": ["192.0.2.13", "192.0.2.14"]},
    },
    "mooncake": {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}},
    "hosts": {
        "p0": host("prefill", 0, 0, ["p0", "p1"], "192.0.2.11", "bond0", 2, 1, 0, "192.0.2.11", 10521, 16, 30000,
                   6700, [inst(0, 0, 6700, SIXTEEN, [30000, 30015], 0)], "192.0.2.11:18481", etcd=True, proxy=True),
        "p1": host("prefill", 1, 0, ["p0", "p1"], "192.0.2.12", "bond0", 2, 1, 1, "192.0.2.11", 10521, 16, 30000,
                   6700, [inst(0, 1, 6700, SIXTEEN, [30016, 30031], 0)], "192.0.2.12:18481"),
        "d0": host("decode", 0, 0, ["d0", "d1"], "192.0.2.13", "bond0", 2, 1, 0, "192.0.2.13", 10521, 16, 30100,
                   6700, [inst(0, 0, 6700, SIXTEEN, [30100, 30115], 0)], "192.0.2.13:18481"),
        "d1": host("decode", 1, 0, ["d0", "d1"], "192.0.2.14", "bond0", 2, 1, 1, "192.0.2.13", 10521, 16, 30100,
                   6700, [inst(0, 1, 6700, SIXTEEN, [30116, 30131], 1)], "192.0.2.14:18481"),
    },
    "etcd_host": "p0", "etcd_ip": "192.0.2.11", "etcd_address": "192.0.2.11:2379",
    "etcd_hosts": ["p0"], "etcd_members": [{"host": "p0", "ip": "192.0.2.11", "client_port": 2379, "peer_port": 2380}],
    "etcd_endpoints": ["192.0.2.11:2379"],
    "proxy_host": "p0", "proxy_ip": "192.0.2.11", "proxy_hosts": ["p0"],
    "proxies": [{"host": "p0", "ip": "192.0.2.11", "url": "http://192.0.2.11:8088", "admin_url": "http://192.0.2.11:8089"}],
}


def test_the_seed_topology_whole():
    assert T.derive(inventory()) == SEED


def rich_inventory():
    """Six hosts, every per-host value distinct: prefill p0..p3 in two DP groups of two nodes x two instances (TP 8),
    decode d0, d1 in one group (TP 16); etcd on d1 and the proxy on p2 (read from p0, the first prefill host)."""
    hosts = {}
    for n, name in enumerate(["p0", "p1", "p2", "p3", "d0", "d1"]):
        hosts[name] = dict(BASE_HOST, a3_business_ip="198.51.100.%d" % (1 + n), a3_nic_name="eth%d" % n,
                           vllm_dp_rpc_port=10500 + n, yuanrong_worker_port=18400 + n, etcd_client_port=2400 + n,
                           vllm_api_port=7000 if name.startswith("p") else 6800,
                           vllm_prefill_dp_groups=2, vllm_prefill_dp_size_local=2, vllm_prefill_tp_size=8,
                           vllm_decode_tp_size=16, vllm_prefill_lookup_rpc_port=" dp_rank ",
                           vllm_decode_lookup_rpc_port="50")
    hosts["p0"].update(a3_etcd_host="d1", a3_proxy_host="p2")
    hosts["p2"].update(proxy_port=8100, proxy_admin_port=8101, proxy_admin_bind_host="127.0.0.3")
    hosts["p3"]["vllm_dp_address"] = "198.51.100.99"
    return {"groups": {"prefill": ["p0", "p1", "p2", "p3"], "decode": ["d0", "d1"]}, "hosts": hosts}


RICH = {
    "sides": {
        "prefill": {
            "hosts": ["p0", "p1", "p2", "p3"],
            "ips": ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"],
            "api_ports": [7000, 7001, 7000, 7001, 7000, 7001, 7000, 7001],
            "dp_size": 4, "dp_size_local": 2, "tp_size": 8, "dp_address": "198.51.100.1", "kv_role": "kv_producer",
            "groups": [
                {"index": 0, "hosts": ["p0", "p1"], "dp_master": "p0", "dp_address": "198.51.100.1",
                 "dp_rpc_port": 10500, "dp_size": 4,
                 "backend_hosts": ["198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2"],
                 "api_ports": [7000, 7001, 7000, 7001]},
                {"index": 1, "hosts": ["p2", "p3"], "dp_master": "p2", "dp_address": "198.51.100.3",
                 "dp_rpc_port": 10502, "dp_size": 4,
                 "backend_hosts": ["198.51.100.3", "198.51.100.3", "198.51.100.4", "198.51.100.4"],
                 "api_ports": [7000, 7001, 7000, 7001]}],
            "instances": 8,
            "backend_hosts": ["198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2",
                              "198.51.100.3", "198.51.100.3", "198.51.100.4", "198.51.100.4"]},
        "decode": {
            "hosts": ["d0", "d1"], "ips": ["198.51.100.5", "198.51.100.6"], "api_ports": [6800, 6800],
            "dp_size": 2, "dp_size_local": 1, "tp_size": 16, "dp_address": "198.51.100.5", "kv_role": "kv_consumer",
            "groups": [{"index": 0, "hosts": ["d0", "d1"], "dp_master": "d0", "dp_address": "198.51.100.5",
                        "dp_rpc_port": 10504, "dp_size": 2, "backend_hosts": ["198.51.100.5", "198.51.100.6"],
                        "api_ports": [6800, 6800]}],
            "instances": 2, "backend_hosts": ["198.51.100.5", "198.51.100.6"]},
    },
    "mooncake": {"prefill": {"dp_size": 4, "tp_size": 8}, "decode": {"dp_size": 2, "tp_size": 16}},
    "hosts": {
        "p0": host("prefill", 0, 0, ["p0", "p1"], "198.51.100.1", "eth0", 4, 2, 0, "198.51.100.1", 10500, 8, 30000,
                   7000, [inst(0, 0, 7000, LOW, [30000, 30007], 0), inst(1, 1, 7001, HIGH, [30008, 30015], 1)],
                   "198.51.100.1:18400"),
        "p1": host("prefill", 1, 0, ["p0", "p1"], "198.51.100.2", "eth1", 4, 2, 2, "198.51.100.1", 10501, 8, 30000,
                   7000, [inst(0, 2, 7000, LOW, [30016, 30023], 2), inst(1, 3, 7001, HIGH, [30024, 30031], 3)],
                   "198.51.100.2:18401"),
        # group 1's kv ports start after group 0's range: 30000 + 1 x 4 x 8
        "p2": host("prefill", 2, 1, ["p2", "p3"], "198.51.100.3", "eth2", 4, 2, 0, "198.51.100.3", 10502, 8, 30032,
                   7000, [inst(0, 0, 7000, LOW, [30032, 30039], 0), inst(1, 1, 7001, HIGH, [30040, 30047], 1)],
                   "198.51.100.3:18402", proxy=True),
        "p3": host("prefill", 3, 1, ["p2", "p3"], "198.51.100.4", "eth3", 4, 2, 2, "198.51.100.99", 10503, 8, 30032,
                   7000, [inst(0, 2, 7000, LOW, [30048, 30055], 2), inst(1, 3, 7001, HIGH, [30056, 30063], 3)],
                   "198.51.100.4:18403"),
        "d0": host("decode", 0, 0, ["d0", "d1"], "198.51.100.5", "eth4", 2, 1, 0, "198.51.100.5", 10504, 16, 30100,
                   6800, [inst(0, 0, 6800, SIXTEEN, [30100, 30115], 50)], "198.51.100.5:18404"),
        "d1": host("decode", 1, 0, ["d0", "d1"], "198.51.100.6", "eth5", 2, 1, 1, "198.51.100.5", 10505, 16, 30100,
                   6800, [inst(0, 1, 6800, SIXTEEN, [30116, 30131], 50)], "198.51.100.6:18405", etcd=True),
    },
    "etcd_host": "d1", "etcd_ip": "198.51.100.6", "etcd_address": "198.51.100.6:2405",
    "etcd_hosts": ["d1"], "etcd_endpoints": ["198.51.100.6:2405"],
    "etcd_members": [{"host": "d1", "ip": "198.51.100.6", "client_port": 2405, "peer_port": 2380}],
    "proxy_host": "p2", "proxy_ip": "198.51.100.3", "proxy_hosts": ["p2"],
    "proxies": [{"host": "p2", "ip": "198.51.100.3", "url": "http://198.51.100.3:8100", "admin_url": "http://127.0.0.3:8101"}],
}


def test_a_layout_where_every_value_differs_whole():
    assert T.derive(rich_inventory()) == RICH


def test_hosts_keep_the_inventory_order_of_each_side():
    inv = rich_inventory()
    inv["groups"] = {"decode": ["d0", "d1"], "prefill": ["p0", "p1", "p2", "p3"]}
    assert list(T.derive(inv)["hosts"]) == ["p0", "p1", "p2", "p3", "d0", "d1"]


def test_a_side_is_read_from_its_first_host():
    """The per-side layout (instances per node, DP groups, TP) is the first host's value (validation makes the others
    agree); the backends still list each host's own instances."""
    inv = inventory()
    inv["hosts"]["p1"].update(vllm_dp_size_local=2, vllm_prefill_dp_groups=2, vllm_prefill_tp_size=8)
    topo = T.derive(inv)
    pre = topo["sides"]["prefill"]
    assert (pre["dp_size"], pre["dp_size_local"], pre["tp_size"], pre["instances"], len(pre["groups"])) == (2, 1, 16, 2, 1)
    assert pre["backend_hosts"] == ["192.0.2.11", "192.0.2.12", "192.0.2.12"]
    assert pre["api_ports"] == [6700, 6700, 6701]


@pytest.mark.parametrize("groups,message", [
    ({"prefill": [], "decode": ["d0"]}, "group 'prefill' is missing or empty"),
    ({"prefill": ["p0"]}, "group 'decode' is missing or empty"),
    ({"prefill": ["p0"], "decode": None}, "group 'decode' is missing or empty"),
])
def test_a_missing_side_is_a_topology_error(groups, message):
    inv = inventory()
    inv["groups"] = groups
    with pytest.raises(T.TopologyError) as err:
        T.derive(inv)
    assert str(err.value) == message


def test_an_etcd_cluster_lists_every_member_in_its_order():
    inv = inventory()
    inv["hosts"]["p0"]["a3_etcd_hosts"] = ["d1", "p0", "p1"]
    inv["hosts"]["d1"]["etcd_peer_port"] = 12380
    topo = T.derive(inv)
    assert topo["etcd_hosts"] == ["d1", "p0", "p1"]
    assert topo["etcd_endpoints"] == ["192.0.2.14:2379", "192.0.2.11:2379", "192.0.2.12:2379"]
    assert topo["etcd_members"][0] == {"host": "d1", "ip": "192.0.2.14", "client_port": 2379, "peer_port": 12380}
    # the first member plays the single etcd's part for the values that name one
    assert (topo["etcd_host"], topo["etcd_ip"], topo["etcd_address"]) == ("d1", "192.0.2.14", "192.0.2.14:2379")
    assert {h for h, v in topo["hosts"].items() if v["is_etcd_host"]} == {"d1", "p0", "p1"}
    inv["hosts"]["p0"]["a3_etcd_host"] = "d0"   # validation refuses both; the list wins
    assert T.derive(inv)["etcd_hosts"] == ["d1", "p0", "p1"]


@pytest.mark.parametrize("value", [[], None, "p1"])
def test_no_etcd_member_list_means_the_one_etcd_host(value):
    inv = inventory()
    inv["hosts"]["p0"].update(a3_etcd_hosts=value, a3_etcd_host="d0")
    topo = T.derive(inv)
    assert topo["etcd_hosts"] == ["d0"] and topo["etcd_endpoints"] == ["192.0.2.13:2379"]


def test_a3_proxy_hosts_puts_a_proxy_on_each_listed_host_in_its_order():
    topo = T.derive(inventory(a3_proxy_hosts=["d1", "p1", "d1"], a3_proxy_host="p0"))
    assert (topo["proxy_host"], topo["proxy_ip"], topo["proxy_hosts"]) == ("d1", "192.0.2.14", ["d1", "p1"])
    assert [p["url"] for p in topo["proxies"]] == ["http://192.0.2.14:8088", "http://192.0.2.12:8088"]
    assert [h for h, v in topo["hosts"].items() if v["is_proxy_host"]] == ["p1", "d1"]


@pytest.mark.parametrize("values, etcd, proxies", [
    ({"a3_ha": True}, ["p0", "p1", "d0"], ["p0", "p1"]),
    ({"a3_ha": "true", "a3_etcd_hosts": ["d1", "d0", "p1"]}, ["d1", "d0", "p1"], ["p0", "p1"]),
    ({"a3_ha": True, "a3_etcd_host": "d1", "a3_proxy_host": "d0"}, ["d1"], ["d0"]),   # a named single host wins
    ({"a3_ha": False}, ["p0"], ["p0"]),
    ({"a3_ha": "no"}, ["p0"], ["p0"]),
])
def test_a3_ha_spreads_etcd_and_the_proxies_over_the_first_hosts(values, etcd, proxies):
    topo = T.derive(inventory(**values))
    assert (topo["etcd_hosts"], topo["proxy_hosts"]) == (etcd, proxies)


@pytest.mark.parametrize("value", [True, "true", " True ", "yes", "on", "1"])
def test_a3_ha_takes_the_truths_ansible_takes(value):
    assert T.derive(inventory(a3_ha=value))["proxy_hosts"] == ["p0", "p1"]


@pytest.mark.parametrize("value", [False, "false", "no", "off", "0", "", None])
def test_a3_ha_off_keeps_the_single_proxy_and_etcd(value):
    topo = T.derive(inventory(a3_ha=value))
    assert (topo["proxy_hosts"], topo["etcd_hosts"]) == (["p0"], ["p0"])


def test_a3_ha_needs_enough_hosts_for_its_members():
    inv = inventory(a3_ha=True)
    inv["groups"] = {"prefill": ["p0"], "decode": ["d0"]}
    topo = T.derive(inv)   # two hosts: no 3-member etcd (validate says so); the two proxies fit
    assert (topo["etcd_hosts"], topo["proxy_hosts"]) == (["p0"], ["p0", "d0"])


def test_an_etcd_or_proxy_host_outside_the_inventory_has_no_address():
    topo = T.derive(inventory(a3_etcd_host="x9", a3_proxy_host="x8"))
    assert {k: topo[k] for k in ("etcd_host", "etcd_ip", "etcd_address", "proxy_host", "proxy_ip")} == {
        "etcd_host": "x9", "etcd_ip": None, "etcd_address": None, "proxy_host": "x8", "proxy_ip": None}
    assert not any(h["is_etcd_host"] or h["is_proxy_host"] for h in topo["hosts"].values())


def test_host_ports_of_the_seed():
    inv = inventory()
    topo = T.derive(inv)
    assert T.host_ports("p0", topo, inv["hosts"]["p0"]) == [
        (6700, 6700, "vllm API port of dp rank 0 (vllm_api_port)"),
        (30000, 30015, "Mooncake kv ports of dp rank 0 (vllm_prefill_kv_port + rank x tp)"),
        (10521, 10521, "DP RPC port (vllm_dp_rpc_port)"),
        (18481, 18481, "yuanrong worker port (yuanrong_worker_port)"),
        (2379, 2379, "etcd client port (etcd_client_port)"),
        (2380, 2380, "etcd peer port (etcd_peer_port)"),
        (8088, 8088, "proxy port (proxy_port)"),
        (8089, 8089, "proxy admin port (proxy_admin_port)"),
    ]
    assert T.host_ports("d1", topo, inv["hosts"]["d1"]) == [
        (6700, 6700, "vllm API port of dp rank 1 (vllm_api_port)"),
        (30116, 30131, "Mooncake kv ports of dp rank 1 (vllm_decode_kv_port + rank x tp)"),
        (18481, 18481, "yuanrong worker port (yuanrong_worker_port)"),
    ]


def test_host_ports_of_the_rich_layout():
    inv = rich_inventory()
    topo = T.derive(inv)
    # p2: the master of prefill group 1 and the proxy host
    assert T.host_ports("p2", topo, inv["hosts"]["p2"]) == [
        (7000, 7000, "vllm API port of dp rank 0 (vllm_api_port)"),
        (30032, 30039, "Mooncake kv ports of dp rank 0 (vllm_prefill_kv_port + rank x tp)"),
        (7001, 7001, "vllm API port of dp rank 1 (vllm_api_port)"),
        (30040, 30047, "Mooncake kv ports of dp rank 1 (vllm_prefill_kv_port + rank x tp)"),
        (10502, 10502, "DP RPC port (vllm_dp_rpc_port)"),
        (18402, 18402, "yuanrong worker port (yuanrong_worker_port)"),
        (8100, 8100, "proxy port (proxy_port)"),
        (8101, 8101, "proxy admin port (proxy_admin_port)"),
    ]
    # d1: a DP member and the etcd host
    assert T.host_ports("d1", topo, inv["hosts"]["d1"]) == [
        (6800, 6800, "vllm API port of dp rank 1 (vllm_api_port)"),
        (30116, 30131, "Mooncake kv ports of dp rank 1 (vllm_decode_kv_port + rank x tp)"),
        (18405, 18405, "yuanrong worker port (yuanrong_worker_port)"),
        (2405, 2405, "etcd client port (etcd_client_port)"),
        (2380, 2380, "etcd peer port (etcd_peer_port)"),
    ]


def test_backends_of_the_rich_layout():
    assert T.backends(T.derive(rich_inventory())) == [
        {"side": "prefill", "host": "p0", "ip": "198.51.100.1", "port": 7000, "dp_rank": 0},
        {"side": "prefill", "host": "p0", "ip": "198.51.100.1", "port": 7001, "dp_rank": 1},
        {"side": "prefill", "host": "p1", "ip": "198.51.100.2", "port": 7000, "dp_rank": 2},
        {"side": "prefill", "host": "p1", "ip": "198.51.100.2", "port": 7001, "dp_rank": 3},
        {"side": "prefill", "host": "p2", "ip": "198.51.100.3", "port": 7000, "dp_rank": 0},
        {"side": "prefill", "host": "p2", "ip": "198.51.100.3", "port": 7001, "dp_rank": 1},
        {"side": "prefill", "host": "p3", "ip": "198.51.100.4", "port": 7000, "dp_rank": 2},
        {"side": "prefill", "host": "p3", "ip": "198.51.100.4", "port": 7001, "dp_rank": 3},
        {"side": "decode", "host": "d0", "ip": "198.51.100.5", "port": 6800, "dp_rank": 0},
        {"side": "decode", "host": "d1", "ip": "198.51.100.6", "port": 6800, "dp_rank": 1},
    ]
