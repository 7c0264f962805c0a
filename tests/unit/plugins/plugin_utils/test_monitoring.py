# -*- coding: utf-8 -*-
"""Prometheus file_sd targets derived from the topology (pure functions)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _monitoring as M
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults

IPS = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}


def topology(**overrides):
    """The topology of four hosts set only by IP and NIC (plus overrides): the rest is the collection's defaults."""
    hostvars = {name: dict(a3_business_ip=ip, a3_nic_name="bond0", **overrides) for name, ip in IPS.items()}
    groups = {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}
    return T.derive(from_hostvars(hostvars, groups, role_defaults(), keys=T.TOPOLOGY_KEYS))


def test_seed_layout_gives_one_target_per_rank_and_one_each_for_etcd_and_proxy():
    sd = M.file_sd(topology(), 8089)
    assert sorted(sd) == ["etcd", "proxy", "vllm"]
    assert [g["targets"] for g in sd["vllm"]] == [["192.0.2.11:6700"], ["192.0.2.12:6700"],
                                                  ["192.0.2.13:6700"], ["192.0.2.14:6700"]]
    assert sd["vllm"][1]["labels"] == {"component": "vllm", "side": "prefill", "host": "p1", "dp_rank": "1",
                                       "instance": "p1:6700"}
    assert sd["vllm"][3]["labels"]["side"] == "decode" and sd["vllm"][3]["labels"]["dp_rank"] == "1"
    assert sd["etcd"] == [{"targets": ["192.0.2.11:2379"],
                           "labels": {"component": "etcd", "side": "prefill", "host": "p0", "instance": "p0:2379"}}]
    assert sd["proxy"] == [{"targets": ["127.0.0.1:8089"],
                            "labels": {"component": "proxy", "side": "prefill", "host": "p0", "instance": "p0:8089"}}]


def test_every_label_value_is_a_string_and_the_groups_are_json():
    """file_sd requires string label values; the files are written with to_nice_json."""
    sd = M.file_sd(topology(), "8088", cluster="a3-prod")
    for groups in sd.values():
        json.dumps(groups)
        for group in groups:
            assert all(isinstance(v, str) for v in group["labels"].values())
            assert group["labels"]["cluster"] == "a3-prod"


def test_several_ranks_per_node_get_consecutive_ports_and_global_ranks():
    topo = topology(vllm_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8)
    sd = M.file_sd(topo, 8088)
    got = [(g["labels"]["host"], g["labels"]["dp_rank"], g["targets"][0]) for g in sd["vllm"]]
    assert got[:4] == [("p0", "0", "192.0.2.11:6700"), ("p0", "1", "192.0.2.11:6701"),
                       ("p1", "2", "192.0.2.12:6700"), ("p1", "3", "192.0.2.12:6701")]
    assert len({g["labels"]["instance"] for g in sd["vllm"]}) == 8
    assert M.dp_sizes(topo) == {"prefill": 4, "decode": 4}


def test_etcd_and_proxy_follow_their_hosts_and_ports():
    topo = topology(a3_etcd_host="p1", a3_proxy_host="d0", etcd_client_port=12379, proxy_admin_port=9000,
                    proxy_admin_bind_host="0.0.0.0")
    sd = M.file_sd(topo, 8089)
    assert sd["etcd"][0]["targets"] == ["192.0.2.12:12379"] and sd["etcd"][0]["labels"]["host"] == "p1"
    assert sd["proxy"][0]["targets"] == ["192.0.2.13:9000"] and sd["proxy"][0]["labels"]["side"] == "decode"


def test_the_proxy_target_is_its_admin_listener():
    """The proxy serves /metrics on its admin listener: on loopback (the default) the target is that address, which a
    Prometheus on the proxy host reaches; a wildcard bind means the proxy host's business IP. The topology places it
    (proxy_admin_bind_host and proxy_admin_port of the proxy's host); the arguments serve a topology without it."""
    assert M.file_sd(topology(proxy_admin_bind_host="127.0.0.1"), 1)["proxy"] == [
        {"targets": ["127.0.0.1:8089"],
         "labels": {"component": "proxy", "side": "prefill", "host": "p0", "instance": "p0:8089"}}]
    for wildcard in ("0.0.0.0", "::", ""):
        assert M.file_sd(topology(proxy_admin_bind_host=wildcard), 1)["proxy"][0]["targets"] == ["192.0.2.11:8089"]
    assert M.file_sd(topology(proxy_admin_bind_host="192.0.2.99"), 1)["proxy"][0]["targets"] == ["192.0.2.99:8089"]
    bare = topology()
    del bare["proxies"]
    for wildcard in ("0.0.0.0", "::", ""):
        assert M.file_sd(bare, 8089, proxy_address=wildcard)["proxy"][0]["targets"] == ["192.0.2.11:8089"]
    assert M.file_sd(bare, 8089, proxy_address="192.0.2.99")["proxy"][0]["targets"] == ["192.0.2.99:8089"]


def test_every_proxy_host_is_a_target():
    sd = M.file_sd(topology(a3_proxy_hosts=["d1", "p1"], proxy_admin_bind_host="0.0.0.0"), 8089)
    assert [(g["labels"]["host"], g["targets"]) for g in sd["proxy"]] == [("d1", ["192.0.2.14:8089"]),
                                                                          ("p1", ["192.0.2.12:8089"])]


def test_ipv6_addresses_are_bracketed():
    hostvars = {name: dict(a3_business_ip="2001:db8::%d" % i, a3_nic_name="bond0") for i, name in enumerate(IPS, 1)}
    topo = T.derive(from_hostvars(hostvars, {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}, role_defaults(),
                                  keys=T.TOPOLOGY_KEYS))
    sd = M.file_sd(topo, 8088)
    assert sd["vllm"][0]["targets"] == ["[2001:db8::1]:6700"]
    assert sd["etcd"][0]["targets"] == ["[2001:db8::1]:2379"]


def test_datasystem_workers_are_listed_for_the_registration_rule():
    assert M.ds_workers(topology()) == [
        {"host": "p0", "side": "prefill", "worker": "192.0.2.11:18481"},
        {"host": "p1", "side": "prefill", "worker": "192.0.2.12:18481"},
        {"host": "d0", "side": "decode", "worker": "192.0.2.13:18481"},
        {"host": "d1", "side": "decode", "worker": "192.0.2.14:18481"}]


@pytest.mark.parametrize("broken, message", [
    (lambda t: t.pop("hosts"), "lacks"),
    (lambda t: t.update(proxy_hosts=["p0", "x9"]), "proxy host"),
    (lambda t: t.update(etcd_members=[{"host": "x9", "client_port": 2379}]), "etcd host"),
])
def test_an_unusable_topology_is_an_error_naming_what_lacks(broken, message):
    topo = topology()
    broken(topo)
    with pytest.raises(M.MonitoringError, match=message):
        M.file_sd(topo, 8088)


def test_a_bad_proxy_port_is_an_error():
    with pytest.raises(M.MonitoringError, match="proxy_port"):
        M.file_sd(topology(), "eighty")


def test_split_sides_label_each_rank_with_its_dp_group_and_size_one_group():
    topo = topology(vllm_decode_dp_groups=2)
    sd = M.file_sd(topo, 8088)
    labels = {g["labels"]["host"]: g["labels"] for g in sd["vllm"]}
    # decode is split (one group per node): rank 0 in each, told apart by dp_group
    assert (labels["d0"]["dp_group"], labels["d0"]["dp_rank"]) == ("0", "0")
    assert (labels["d1"]["dp_group"], labels["d1"]["dp_rank"]) == ("1", "0")
    # prefill stays one group: no dp_group label, as in the seed
    assert "dp_group" not in labels["p1"] and labels["p1"]["dp_rank"] == "1"
    assert M.dp_sizes(topo) == {"prefill": 2, "decode": 1}
    assert "dp_group" not in json.dumps(M.file_sd(topology(), 8088))
