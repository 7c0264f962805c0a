# -*- coding: utf-8 -*-
"""_inventory.from_hostvars: what a host sets wins, else the collection's role default, else None; the keys it
collects are the options the roles' specs declare."""
from __future__ import annotations

from collections import OrderedDict

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _inventory as I
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._specs import from_fact, host_keys, load
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import derive

GROUPS = {"prefill": ["p0", "p1"], "decode": ["d0", "d1"], "ungrouped": ["localhost"]}


def hosts_alone():
    """An inventory of hosts alone: hostvars hold the business IP and NIC, nothing else."""
    ips = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}
    return {h: {"a3_business_ip": ip, "a3_nic_name": "bond0"} for h, ip in ips.items()}


def test_a_value_the_host_sets_wins_over_the_default():
    hv = hosts_alone()
    hv["d1"]["vllm_api_port"] = 7000
    inv = I.from_hostvars(hv, GROUPS, {"vllm_api_port": 6700})
    assert inv["hosts"]["d1"]["vllm_api_port"] == 7000
    assert inv["hosts"]["d0"]["vllm_api_port"] == 6700


def test_without_defaults_an_unset_key_reads_none():
    inv = I.from_hostvars(hosts_alone(), GROUPS)
    assert inv["hosts"]["p0"]["vllm_api_port"] is None
    assert set(inv["hosts"]["p0"]) == set(host_keys())


def test_only_prefill_and_decode_hosts_in_group_order():
    inv = I.from_hostvars(hosts_alone(), GROUPS, {})
    assert inv["groups"] == {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}
    assert list(inv["hosts"]) == ["p0", "p1", "d0", "d1"]


def test_missing_group_reads_as_empty():
    inv = I.from_hostvars(hosts_alone(), {"prefill": ["p0"]}, {})
    assert inv["groups"] == {"prefill": ["p0"], "decode": []}


def test_wrapper_types_become_plain():
    class Text(str):
        pass

    hv = hosts_alone()
    hv["p0"]["a3_nic_name"] = Text("bond1")
    hv["p0"]["vllm_dp_size_local"] = True   # a bool stays a bool (validation rejects it by type)
    keys = ("a3_nic_name", "vllm_dp_size_local", "vllm_env_common")
    inv = I.from_hostvars(hv, GROUPS, {"vllm_env_common": OrderedDict(A=Text("1"))}, keys=keys)
    p0 = inv["hosts"]["p0"]
    assert p0["a3_nic_name"].__class__ is str and p0["a3_nic_name"] == "bond1"
    assert p0["vllm_dp_size_local"] is True
    assert p0["vllm_env_common"].__class__ is dict and p0["vllm_env_common"]["A"].__class__ is str


def test_the_collection_defaults_make_a_hosts_only_inventory_derive_the_seed_topology():
    topo = derive(I.from_hostvars(hosts_alone(), GROUPS, role_defaults()))
    p0, d1 = topo["hosts"]["p0"], topo["hosts"]["d1"]
    # the seed: dp 2 per side, DP masters P0 and D0, etcd and proxy on P0, tp 16, kv ports 30000/30100 + rank x 16
    assert topo["etcd_host"] == "p0" and topo["proxy_host"] == "p0"
    assert p0["dp_size"] == 2 and d1["dp_rank_start"] == 1 and d1["dp_address"] == "192.0.2.13"
    assert [i["kv_ports"][0] for i in d1["instances"]] == [30116]
    assert [i["api_port"] for i in p0["instances"]] == [6700]


def test_role_defaults_ship_every_host_key_but_the_per_host_ones():
    """A key without a shipped default is a required option (the inventory's business IP and NIC, or a value a
    wrapper role passes) or the optional per-host DP address."""
    defaults, specs = role_defaults(), load()
    unshipped = {k for k in host_keys() if k not in defaults}
    assert unshipped == {k for k in host_keys() if specs[k].required} | {"vllm_dp_address"}
    assert {"a3_business_ip", "a3_nic_name"} <= unshipped


def test_the_keys_are_the_declared_options_but_the_fact_and_what_derives_from_it():
    keys, specs = host_keys(), load()
    assert set(keys) == set(specs) - from_fact()
    assert {"a3", "a3_self", "yuanrong_worker_address", "proxy_admin_url"} <= from_fact()
    assert "a3" not in keys and "vllm_api_port" in keys and keys[0] in specs


def test_the_keys_given_are_the_keys_read_and_lists_stay_lists():
    hv = hosts_alone()
    hv["d0"]["vllm_env_unset"] = ("A", ["B", 2])
    inv = I.from_hostvars(hv, GROUPS, {"vllm_env_unset": ["C"]}, keys=("vllm_env_unset", "a3_nic_name"))
    assert inv["hosts"]["d0"] == {"vllm_env_unset": ["A", ["B", 2]], "a3_nic_name": "bond0"}
    assert inv["hosts"]["p0"] == {"vllm_env_unset": ["C"], "a3_nic_name": "bond0"}


class _Undefined(Exception):
    pass


class _Failing(dict):
    """hostvars of one host whose value of `key` fails to template (it names a role default the controller lacks)."""

    def __init__(self, values, key, exc=_Undefined):
        super().__init__(values)
        self.key, self.exc = key, exc

    def __getitem__(self, name):
        if name == self.key:
            raise self.exc("'container_image' is undefined")
        return super().__getitem__(name)


def test_a_value_naming_a_role_default_is_read_as_its_template_text():
    hv = {"p0": _Failing({"proxy_edge_image": "x", "vllm_api_port": 1}, "proxy_edge_image")}
    raw = {"p0": {"proxy_edge_image": "{{ container_image }}"}}
    inv = I.from_hostvars(hv, {"prefill": ["p0"]}, {}, keys=("proxy_edge_image", "vllm_api_port"), raw=raw.get)
    assert inv["hosts"]["p0"] == {"proxy_edge_image": "{{ container_image }}", "vllm_api_port": 1}


def test_other_templating_failures_are_raised():
    hv = {"p0": _Failing({"proxy_edge_image": "x"}, "proxy_edge_image")}
    with pytest.raises(_Undefined):   # without raw
        I.from_hostvars(hv, {"prefill": ["p0"]}, {}, keys=("proxy_edge_image",))
    with pytest.raises(_Undefined):   # the raw value holds no template
        I.from_hostvars(hv, {"prefill": ["p0"]}, {}, keys=("proxy_edge_image",),
                        raw={"p0": {"proxy_edge_image": "plain"}}.get)
