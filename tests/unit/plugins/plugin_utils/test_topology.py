# -*- coding: utf-8 -*-
"""Topology derivation (_topology) and the inventory validation of the layout (_validation), pure functions."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _validation as V

BASE_HOST = {
    "a3_npus_per_node": 16, "a3_etcd_host": "", "a3_proxy_host": "",
    "vllm_dp_size_local": 1, "vllm_api_port": 6700, "vllm_dp_rpc_port": 10521,
    "vllm_prefill_tp_size": 16, "vllm_decode_tp_size": 16,
    "vllm_prefill_kv_port": 30000, "vllm_decode_kv_port": 30100,
    "vllm_prefill_lookup_rpc_port": 0, "vllm_decode_lookup_rpc_port": "dp_rank",
    "etcd_client_port": 2379, "etcd_peer_port": 2380, "yuanrong_worker_port": 18481, "proxy_port": 8088, "proxy_admin_port": 8089,
    "hugepages_target": "500G", "hugepages_page_size": "2M",
}
IPS = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}


def inventory(**overrides):
    hosts = {}
    for name, ip in IPS.items():
        hosts[name] = dict(BASE_HOST, a3_business_ip=ip, a3_nic_name="bond0")
    inv = {"groups": {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}, "hosts": hosts}
    for key, value in overrides.items():
        for h in hosts:
            hosts[h][key] = value
    return inv


def test_seed_topology_is_derived():
    topo = T.derive(inventory())
    assert topo["etcd_host"] == "p0" and topo["proxy_host"] == "p0"
    assert topo["etcd_address"] == "192.0.2.11:2379"
    assert topo["mooncake"] == {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    p1, d1 = topo["hosts"]["p1"], topo["hosts"]["d1"]
    assert (p1["dp_rank_start"], p1["dp_address"], p1["dp_size"]) == (1, "192.0.2.11", 2)
    assert (d1["dp_rank_start"], d1["dp_address"]) == (1, "192.0.2.13")
    assert d1["instances"] == [{"local_rank": 0, "dp_rank": 1, "api_port": 6700, "devices": list(range(16)),
                                "kv_ports": [30116, 30131], "lookup_rpc_port": 1}]
    assert p1["instances"][0]["lookup_rpc_port"] == 0
    assert topo["hosts"]["d0"]["ds_worker_addr"] == "192.0.2.13:18481"
    assert topo["sides"]["decode"]["backend_hosts"] == ["192.0.2.13", "192.0.2.14"]
    assert topo["sides"]["prefill"]["api_ports"] == [6700, 6700]


def test_two_instances_per_host():
    inv = inventory(vllm_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8)
    topo = T.derive(inv)
    p1 = topo["hosts"]["p1"]
    assert topo["sides"]["prefill"]["dp_size"] == 4
    assert [i["dp_rank"] for i in p1["instances"]] == [2, 3]
    assert [i["api_port"] for i in p1["instances"]] == [6700, 6701]
    assert p1["instances"][1]["devices"] == list(range(8, 16))
    assert topo["sides"]["prefill"]["backend_hosts"] == ["192.0.2.11", "192.0.2.11", "192.0.2.12", "192.0.2.12"]
    assert topo["sides"]["prefill"]["api_ports"] == [6700, 6701, 6700, 6701]


def test_etcd_and_proxy_host_can_be_moved():
    inv = inventory(a3_etcd_host="p1", a3_proxy_host="d0")
    topo = T.derive(inv)
    assert (topo["etcd_host"], topo["etcd_ip"], topo["proxy_host"]) == ("p1", "192.0.2.12", "d0")
    assert topo["hosts"]["d0"]["is_proxy_host"] and not topo["hosts"]["p0"]["is_proxy_host"]


def test_seed_inventory_is_valid_with_one_warning_per_instance():
    errors, warnings = V.validate(inventory())
    assert errors == []
    assert len(warnings) == 4 and all("random port band [20000, 36000)" in w for w in warnings)


@pytest.mark.parametrize("size,expected", [("500G", 500 * 2 ** 30), ("1T", 2 ** 40), ("2048 kB", 2 ** 21),
                                           ("2M", 2 ** 21), (4096, 4096), ("128MiB", 2 ** 27)])
def test_parse_size(size, expected):
    assert T.parse_size(size) == expected


@pytest.mark.parametrize("size,shm,mib", [("500G", "500g", 512000), ("1T", "1024g", 1048576), ("128M", "128m", 128)])
def test_dependent_sizes_derive_from_the_target(size, shm, mib):
    assert T.docker_size(size) == shm and T.size_mib(size) == mib


def test_parse_size_rejects_garbage():
    with pytest.raises(ValueError, match="500G"):
        T.parse_size("lots")


def _one_error(inv, **kw):
    errors, _unused = V.validate(inv, **kw)
    assert len(errors) == 1, errors
    return errors[0]


def test_placeholder_named_with_host_and_variable():
    inv = inventory()
    inv["hosts"]["p1"]["a3_business_ip"] = "<节点1业务IP>"
    msg = _one_error(inv)
    assert msg.startswith("p1: a3_business_ip is still the placeholder") and "set it to" in msg


def test_placeholders_are_warnings_in_render_mode():
    inv = inventory()
    inv["hosts"]["p1"]["a3_nic_name"] = "<业务网卡名>"
    errors, warnings = V.validate(inv, allow_placeholders=True)
    assert errors == [] and any("p1: a3_nic_name is still the placeholder" in w for w in warnings)


def test_all_problems_reported_at_once():
    inv = inventory()
    inv["hosts"]["p0"]["a3_business_ip"] = "192.0.2.300"
    inv["hosts"]["d1"]["a3_nic_name"] = ""
    inv["hosts"]["d0"]["a3_business_ip"] = "192.0.2.12"
    errors, _unused = V.validate(inv)
    assert len(errors) == 3
    assert any(e.startswith("p0: a3_business_ip '192.0.2.300' is not a valid IP") for e in errors)
    assert any(e.startswith("d1: a3_nic_name is not set") for e in errors)
    assert any(e.startswith("p1, d0: a3_business_ip 192.0.2.12 is used by 2 hosts") for e in errors)


def test_empty_group():
    inv = inventory()
    inv["groups"]["decode"] = []
    msg = _one_error(inv)
    assert "group 'decode' is missing or empty" in msg


def test_host_in_both_groups():
    inv = inventory()
    inv["groups"]["decode"] = ["d0", "p1"]
    errors, _unused = V.validate(inv)
    assert any("p1: host is in both 'prefill' and 'decode'" in e for e in errors)


def test_tp_times_local_above_npus():
    inv = inventory(vllm_dp_size_local=2)
    errors, _unused = V.validate(inv)
    assert any(e.startswith("p0, p1: vllm_prefill_tp_size 16 x vllm_dp_size_local 2 = 32 NPUs, but the node has 16")
               for e in errors), errors


def test_prefill_tp_lower_than_decode():
    inv = inventory(vllm_prefill_tp_size=8)
    msg = _one_error(inv)
    assert "vllm_prefill_tp_size 8 is lower than vllm_decode_tp_size 16" in msg


def test_kv_ranges_of_two_instances_overlap():
    # decode kv 30100 with tp 16: rank ranges 30100-30115 and 30116-30131; prefill kv 30110 overlaps
    # nothing on decode hosts, but a prefill kv port inside its own API port does.
    inv = inventory(vllm_prefill_kv_port=6690)
    errors, _unused = V.validate(inv)
    assert any(e.startswith("p0: vllm API port of dp rank 0 (vllm_api_port) [6700-6700] overlaps Mooncake kv ports")
               for e in errors), errors


def test_duplicate_port_on_one_host():
    inv = inventory(proxy_port=2379)
    msg = _one_error(inv)
    assert msg.startswith("p0: etcd client port (etcd_client_port) [2379-2379] is the same port as proxy port")


def test_an_integer_lookup_rpc_port_counts_up_per_local_instance():
    # several instances on a host get distinct values (the IPC socket is named after it); one per node keeps it
    topo = T.derive(inventory(vllm_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8))
    assert [i["lookup_rpc_port"] for i in topo["hosts"]["p1"]["instances"]] == [0, 1]
    assert [i["lookup_rpc_port"] for i in topo["hosts"]["d1"]["instances"]] == [2, 3]   # dp_rank
    assert [i["lookup_rpc_port"] for i in T.derive(inventory())["hosts"]["p1"]["instances"]] == [0]


def test_per_side_layout_of_the_glm5_guide():
    # vLLM-Ascend's GLM-5 guide on four A3 nodes: prefill DP4 x TP8 (2 per node), decode DP8 x TP4 (4 per node)
    inv = inventory(vllm_prefill_dp_size_local=2, vllm_prefill_tp_size=8,
                    vllm_decode_dp_size_local=4, vllm_decode_tp_size=4)
    errors, _unused = V.validate(inv)
    assert not errors, errors
    topo = T.derive(inv)
    assert topo["mooncake"] == {"prefill": {"dp_size": 4, "tp_size": 8}, "decode": {"dp_size": 8, "tp_size": 4}}
    p1, d1 = topo["hosts"]["p1"], topo["hosts"]["d1"]
    assert (p1["dp_size"], p1["dp_size_local"], p1["dp_rank_start"]) == (4, 2, 2)
    assert [(i["dp_rank"], i["api_port"], i["devices"][0], i["devices"][-1], i["kv_ports"]) for i in p1["instances"]] == [
        (2, 6700, 0, 7, [30016, 30023]), (3, 6701, 8, 15, [30024, 30031])]
    assert (d1["dp_size"], d1["dp_rank_start"]) == (8, 4)
    assert [i["devices"] for i in d1["instances"]][-1] == [12, 13, 14, 15]
    assert [i["kv_ports"] for i in d1["instances"]] == [[30116, 30119], [30120, 30123], [30124, 30127], [30128, 30131]]
    assert topo["sides"]["decode"]["api_ports"] == [6700, 6701, 6702, 6703] * 2
    assert topo["sides"]["prefill"]["backend_hosts"] == ["192.0.2.11", "192.0.2.11", "192.0.2.12", "192.0.2.12"]


def test_per_side_layout_must_fit_the_node():
    errors, _unused = V.validate(inventory(vllm_decode_dp_size_local=4, vllm_decode_tp_size=8))
    assert any(e.startswith("d0, d1: vllm_decode_tp_size 8 x vllm_decode_dp_size_local 4 = 32 NPUs, but the node has 16")
               for e in errors), errors
    errors, _unused = V.validate(inventory(vllm_prefill_dp_size_local=0))
    assert any("vllm_prefill_dp_size_local is 0: set a positive integer" in e for e in errors), errors


def test_hugepage_target_not_a_multiple():
    msg = _one_error(inventory(hugepages_target="1001M"))
    assert msg.startswith("p0, p1, d0, d1: hugepages_target 1001M is not a multiple of the page size 2M")


def test_side_values_must_agree_within_a_group():
    inv = inventory()
    inv["hosts"]["d1"]["vllm_decode_tp_size"] = 8
    msg = _one_error(inv)
    assert "vllm_decode_tp_size differs between the decode hosts" in msg


def test_unknown_etcd_host():
    msg = _one_error(inventory(a3_etcd_host="p9"))
    assert "a3_etcd_host is 'p9', which is not a host" in msg


def test_bad_number():
    msg = _one_error(inventory(vllm_api_port="sixty"))
    assert msg == "p0, p1, d0, d1: vllm_api_port is 'sixty': set a positive integer"


def test_backends_lists_every_instance_prefill_first():
    b = T.backends(T.derive(inventory()))
    assert [(x["side"], x["host"], x["port"]) for x in b] == [
        ("prefill", "p0", 6700), ("prefill", "p1", 6700), ("decode", "d0", 6700), ("decode", "d1", 6700)]


def test_input_is_not_modified():
    inv = inventory()
    before = copy.deepcopy(inv)
    V.validate(inv)
    T.derive(inv)
    assert inv == before


# --- Independent DP groups per side (vllm_<side>_dp_groups) -------------------------------------------------------

def inventory8(**overrides):
    """Eight hosts: four prefill (p0..p3), four decode (d0..d3)."""
    hosts = {}
    names = {"prefill": ["p0", "p1", "p2", "p3"], "decode": ["d0", "d1", "d2", "d3"]}
    for n, name in enumerate(names["prefill"] + names["decode"]):
        hosts[name] = dict(BASE_HOST, a3_business_ip="192.0.2.%d" % (21 + n), a3_nic_name="bond0")
    inv = {"groups": names, "hosts": hosts}
    for key, value in overrides.items():
        for h in hosts:
            hosts[h][key] = value
    return inv


def test_one_group_per_side_is_the_seed():
    """Unset and 1 derive exactly the same topology (the seed's one DP group per side)."""
    seed = T.derive(inventory())
    assert T.derive(inventory(vllm_prefill_dp_groups=1, vllm_decode_dp_groups=1)) == seed
    for side in T.SIDES:
        (group,) = seed["sides"][side]["groups"]
        assert group["hosts"] == seed["sides"][side]["hosts"] and group["dp_size"] == 2
        assert all(seed["hosts"][h]["group_hosts"] == group["hosts"] for h in group["hosts"])


def test_two_groups_on_four_hosts_one_per_node():
    topo = T.derive(inventory(vllm_prefill_dp_groups=2, vllm_decode_dp_groups=2))
    for side, (a, b) in (("prefill", ("p0", "p1")), ("decode", ("d0", "d1"))):
        groups = topo["sides"][side]["groups"]
        assert [g["hosts"] for g in groups] == [[a], [b]]
        assert [g["dp_master"] for g in groups] == [a, b]
        assert [g["dp_address"] for g in groups] == [IPS[a], IPS[b]]
        assert [g["dp_size"] for g in groups] == [1, 1]
        for h in (a, b):
            me = topo["hosts"][h]
            # each node is the DP master of its own group of one: rank 0, dp size 1, its own address
            assert (me["dp_size"], me["dp_rank_start"], me["dp_address"], me["group_hosts"]) == (1, 0, IPS[h], [h])
            assert [i["dp_rank"] for i in me["instances"]] == [0]
        # the proxy still lists every instance of every group
        assert topo["sides"][side]["backend_hosts"] == [IPS[a], IPS[b]]
        assert topo["sides"][side]["api_ports"] == [6700, 6700]
    # Mooncake blocks: one group of each side; every instance's own block equals what it runs (dp 1)
    assert topo["mooncake"] == {"prefill": {"dp_size": 1, "tp_size": 16}, "decode": {"dp_size": 1, "tp_size": 16}}
    # group 1's kv_port starts after group 0's range, so rank 0 of both groups never shares a handshake port
    assert (topo["hosts"]["p0"]["kv_port"], topo["hosts"]["p1"]["kv_port"]) == (30000, 30016)
    assert topo["hosts"]["p1"]["instances"][0]["kv_ports"] == [30016, 30031]
    assert topo["hosts"]["d1"]["instances"][0]["kv_ports"] == [30116, 30131]
    # the DP RPC port is bound by every group's master
    assert any("DP RPC" in w for _a, _b, w in T.host_ports("p1", topo, inventory()["hosts"]["p1"]))
    errors, _unused = V.validate(inventory(vllm_prefill_dp_groups=2, vllm_decode_dp_groups=2))
    assert errors == []


def test_two_groups_on_eight_hosts():
    inv = inventory8(vllm_prefill_dp_groups=2, vllm_decode_dp_groups=2, vllm_decode_dp_size_local=2,
                     vllm_decode_tp_size=8)
    topo = T.derive(inv)
    pre, dec = topo["sides"]["prefill"], topo["sides"]["decode"]
    assert [g["hosts"] for g in pre["groups"]] == [["p0", "p1"], ["p2", "p3"]]
    assert [g["dp_address"] for g in pre["groups"]] == ["192.0.2.21", "192.0.2.23"]
    assert [g["dp_size"] for g in pre["groups"]] == [2, 2]
    assert [g["hosts"] for g in dec["groups"]] == [["d0", "d1"], ["d2", "d3"]]
    assert [g["dp_size"] for g in dec["groups"]] == [4, 4]
    assert [g["dp_master"] for g in dec["groups"]] == ["d0", "d2"]
    by_host = {h: (topo["hosts"][h]["dp_rank_start"], topo["hosts"][h]["dp_address"], topo["hosts"][h]["dp_size"],
                   topo["hosts"][h]["group"]) for h in topo["hosts"]}
    assert by_host["p3"] == (1, "192.0.2.23", 2, 1)
    assert by_host["d1"] == (2, "192.0.2.25", 4, 0)
    assert by_host["d3"] == (2, "192.0.2.27", 4, 1)
    assert [i["dp_rank"] for i in topo["hosts"]["d3"]["instances"]] == [2, 3]
    # every instance of a side keeps its own kv port range (the seed's formula over the whole side)
    kv = [tuple(i["kv_ports"]) for h in dec["hosts"] for i in topo["hosts"][h]["instances"]]
    assert kv == [(30100 + k * 8, 30107 + k * 8) for k in range(8)]
    assert topo["hosts"]["d2"]["kv_port"] == 30132
    assert len(pre["backend_hosts"]) == 4 and len(dec["backend_hosts"]) == 8
    assert dec["api_ports"] == [6700, 6701] * 4
    assert topo["mooncake"] == {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 4, "tp_size": 8}}
    assert dec["groups"][1]["backend_hosts"] == \
        ["192.0.2.27", "192.0.2.27", "192.0.2.28", "192.0.2.28"]
    errors, _unused = V.validate(inv)
    assert errors == []
    # one group per side on the same hosts stays one DP group of four
    one = T.derive(inventory8())
    assert one["hosts"]["p3"]["dp_rank_start"] == 3 and one["hosts"]["p3"]["dp_address"] == "192.0.2.21"


def test_groups_that_do_not_divide_the_side_are_refused():
    errors, _unused = V.validate(inventory8(vllm_prefill_dp_groups=3))
    (msg,) = [e for e in errors if "vllm_prefill_dp_groups" in e]
    assert msg.startswith("p0: vllm_prefill_dp_groups is 3 but the prefill group has 4 hosts (p0, p1, p2, p3)")
    assert "set vllm_prefill_dp_groups to one of 1, 2, 4" in msg
    errors, _unused = V.validate(inventory(vllm_decode_dp_groups=4))
    assert any(e.startswith("d0: vllm_decode_dp_groups is 4 but the decode group has 2 hosts") for e in errors)


def test_groups_must_be_a_positive_integer_and_one_value_per_side():
    errors, _unused = V.validate(inventory(vllm_decode_dp_groups=0))
    assert any("d0, d1: vllm_decode_dp_groups is 0: set a positive integer" in e for e in errors)
    errors, _unused = V.validate(inventory(vllm_prefill_dp_groups="two"))
    assert any("vllm_prefill_dp_groups is 'two'" in e for e in errors)
    inv = inventory()
    inv["hosts"]["p1"]["vllm_prefill_dp_groups"] = 2
    errors, _unused = V.validate(inv)
    assert any(e.startswith("p0, p1: vllm_prefill_dp_groups differs between the prefill hosts (p0=1, p1=2)")
               for e in errors)


def test_dp_address_override_is_checked_against_its_own_group():
    inv = inventory8(vllm_prefill_dp_groups=2)
    inv["hosts"]["p3"]["vllm_dp_address"] = "192.0.2.21"   # group 0's master, not its own group's
    _unused, warnings = V.validate(inv)
    assert any(w.startswith("p3: vllm_dp_address 192.0.2.21 is not the prefill group's first host (192.0.2.23)")
               for w in warnings)
    assert not any(w.startswith("p1: vllm_dp_address") for w in warnings)
