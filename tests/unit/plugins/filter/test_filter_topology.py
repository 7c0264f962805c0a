# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/topology.py, called through FilterModule().filters() as Ansible calls it.

The seed layout (2 prefill + 2 decode nodes, 16 NPUs each, every other value the role defaults) gives the literal
topology below; a bad inventory is one AnsibleFilterError that names the cause and points at the validation."""
from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.topology import FilterModule  # noqa: E402

GROUPS = {"prefill": ["p0", "p1"], "decode": ["d0", "d1"], "all": ["p0", "p1", "d0", "d1"]}
IPS = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}


def hostvars(**changes):
    """The seed inventory's hostvars: only the business IP and NIC per host (the rest is the roles' defaults)."""
    hv = {name: {"a3_business_ip": ip, "a3_nic_name": "bond0", "inventory_hostname": name} for name, ip in IPS.items()}
    for host, values in changes.items():
        hv[host].update(values)
    return hv


def topology(groups, hv):
    return FilterModule().filters()["topology"](groups, hv)


def test_the_filters_are_registered_under_their_names():
    assert sorted(FilterModule().filters()) == ["backends", "topology"]


def test_seed_topology_from_hostvars_and_role_defaults():
    topo = topology(GROUPS, hostvars())
    assert topo["mooncake"] == {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    assert (topo["etcd_host"], topo["etcd_ip"], topo["etcd_address"], topo["proxy_host"], topo["proxy_ip"]) == (
        "p0", "192.0.2.11", "192.0.2.11:2379", "p0", "192.0.2.11")
    assert topo["hosts"]["d1"] == {
        "side": "decode", "index": 1, "group": 0, "group_hosts": ["d0", "d1"], "business_ip": "192.0.2.14",
        "nic_name": "bond0", "dp_size": 2, "dp_size_local": 1, "dp_rank_start": 1, "dp_address": "192.0.2.13",
        "dp_rpc_port": 10521, "tp_size": 16, "kv_port": 30100, "vllm_start_port": 6700,
        "instances": [{"local_rank": 0, "dp_rank": 1, "api_port": 6700,
                       "devices": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
                       "kv_ports": [30116, 30131], "lookup_rpc_port": 1}],
        "ds_worker_addr": "192.0.2.14:18481", "is_etcd_host": False, "is_proxy_host": False}


def test_a_host_value_wins_over_the_role_default():
    topo = topology(GROUPS, hostvars(p0={"vllm_api_port": 7000}, p1={"vllm_api_port": 7000},
                                     d0={"a3_etcd_host": "d1"}))
    assert topo["sides"]["prefill"]["api_ports"] == [7000, 7000]
    assert topo["sides"]["decode"]["api_ports"] == [6700, 6700]
    # the etcd host is read from the first prefill host only
    assert topo["etcd_host"] == "p0"


def test_backends_of_the_seed():
    filters = FilterModule().filters()
    assert filters["backends"](filters["topology"](GROUPS, hostvars())) == [
        {"side": "prefill", "host": "p0", "ip": "192.0.2.11", "port": 6700, "dp_rank": 0},
        {"side": "prefill", "host": "p1", "ip": "192.0.2.12", "port": 6700, "dp_rank": 1},
        {"side": "decode", "host": "d0", "ip": "192.0.2.13", "port": 6700, "dp_rank": 0},
        {"side": "decode", "host": "d1", "ip": "192.0.2.14", "port": 6700, "dp_rank": 1},
    ]


@pytest.mark.parametrize("groups,hv,cause", [
    # TopologyError: a side without hosts
    ({"prefill": ["p0", "p1"]}, hostvars(), "group 'decode' is missing or empty"),
    # KeyError: a group member hostvars does not know
    ({"prefill": ["p0", "p9"], "decode": ["d0", "d1"]}, hostvars(), "'p9'"),
    # TypeError: a number that is not set at all
    (GROUPS, hostvars(p0={"vllm_dp_rpc_port": None}), "int() argument must be a string, a bytes-like object or a "
     "real number, not 'NoneType'"),
    # ValueError: a number that is not a number
    (GROUPS, hostvars(p0={"vllm_dp_rpc_port": "sixty"}), "invalid literal for int() with base 10: 'sixty'"),
])
def test_an_unusable_inventory_is_one_filter_error(groups, hv, cause):
    with pytest.raises(AnsibleFilterError) as err:
        topology(groups, hv)
    assert err.value.message == ("cannot derive the topology (%s): run playbooks/validate.yml to see every inventory "
                                 "problem" % cause)
