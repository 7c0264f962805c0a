# -*- coding: utf-8 -*-
"""Broken inventories: playbooks/validate.yml fails on the controller with the specific message, and
nothing else, before any task touches a node (the node hosts are never contacted)."""
from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from helpers import ROOT, venv_bin

GOOD_HOSTS = {
    "prefill": {"hosts": {"p0": {"a3_business_ip": "192.0.2.11", "a3_nic_name": "bond0"},
                          "p1": {"a3_business_ip": "192.0.2.12", "a3_nic_name": "bond0"}}},
    "decode": {"hosts": {"d0": {"a3_business_ip": "192.0.2.13", "a3_nic_name": "bond0"},
                         "d1": {"a3_business_ip": "192.0.2.14", "a3_nic_name": "bond0"}}},
}


def make_inventory(tmp_path, hosts=None, group_vars=None):
    """A hosts.yml alone (the seed values are the roles' defaults), plus group_vars/all overrides when
    given; the nodes are unreachable on purpose (ssh to a .invalid name): a task that touched one would
    fail differently."""
    inv = tmp_path / "inv"
    (inv / "group_vars" / "all").mkdir(parents=True)
    data = yaml.safe_load(yaml.safe_dump(hosts or GOOD_HOSTS))
    for group in data.values():
        for hv in (group.get("hosts") or {}).values():
            hv.setdefault("ansible_host", "node.invalid")
    (inv / "hosts.yml").write_text(yaml.safe_dump(data, allow_unicode=True))
    if group_vars:
        (inv / "group_vars" / "all" / "zz-test.yml").write_text(yaml.safe_dump(group_vars))
    return inv


def validate(inv):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([venv_bin("ansible-playbook"), "playbooks/validate.yml", "-i", str(inv)],
                          cwd=ROOT, capture_output=True, text=True, env=env, check=False)


def problems(proc):
    m = re.search(r"The inventory has (\d+) problem\(s\); nothing was changed on any node:\n(.*?)\n\s*\n",
                  proc.stdout + "\n\n", re.S)
    assert m, "no problem list in:\n" + proc.stdout[-3000:]
    items = [l.strip()[2:] for l in m.group(2).splitlines() if l.strip().startswith("- ")]
    assert int(m.group(1)) == len(items)
    return items


def with_host(**changes):
    hosts = yaml.safe_load(yaml.safe_dump(GOOD_HOSTS))
    for host, values in changes.items():
        group = "prefill" if host.startswith("p") else "decode"
        hosts[group]["hosts"][host].update(values)
    return hosts


CASES = [
    ("placeholder", dict(hosts=with_host(p1={"a3_business_ip": "<节点1业务IP>"})),
     "p1: a3_business_ip is still the placeholder '<节点1业务IP>': set it to the node's business IP"),
    ("invalid_ip", dict(hosts=with_host(d0={"a3_business_ip": "192.0.2.300"})),
     "d0: a3_business_ip '192.0.2.300' is not a valid IP address"),
    ("missing_nic", dict(hosts=with_host(d1={"a3_nic_name": ""})),
     "d1: a3_nic_name is not set: set it to the business NIC name"),
    ("empty_group", dict(hosts={"prefill": GOOD_HOSTS["prefill"], "decode": {"hosts": {}}}),
     "inventory: group 'decode' is missing or empty"),
    ("duplicate_ip", dict(hosts=with_host(d1={"a3_business_ip": "192.0.2.13"})),
     "d0, d1: a3_business_ip 192.0.2.13 is used by 2 hosts"),
    ("tp_above_npus", dict(group_vars={"vllm_dp_size_local": 2, "vllm_prefill_lookup_rpc_port": "dp_rank"}),
     None),
    ("prefill_tp_below_decode", dict(group_vars={"vllm_prefill_tp_size": 8}),
     "prefill/decode: vllm_prefill_tp_size 8 is lower than vllm_decode_tp_size 16"),
    ("kv_overlaps_service_port", dict(group_vars={"vllm_decode_kv_port": 18470}),
     "d0: Mooncake kv ports of dp rank 0 (vllm_decode_kv_port + rank x tp) [18470-18485] overlaps yuanrong worker"),
    ("kv_ranges_overlap_on_host", dict(group_vars={"vllm_dp_size_local": 2, "vllm_prefill_tp_size": 8,
                                                   "vllm_decode_tp_size": 8, "vllm_prefill_lookup_rpc_port": "dp_rank",
                                                   "vllm_api_port": 30008}),
     None),
    ("duplicate_port", dict(group_vars={"proxy_port": 10521}),
     "p0: DP RPC port (vllm_dp_rpc_port) [10521-10521] is the same port as proxy port (proxy_port) [10521-10521]"),
    ("side_layout_above_npus", dict(group_vars={"vllm_decode_dp_size_local": 4, "vllm_decode_tp_size": 8}),
     "d0, d1: vllm_decode_tp_size 8 x vllm_decode_dp_size_local 4 = 32 NPUs, but the node has 16"),
    ("hugepages_not_multiple", dict(group_vars={"hugepages_target": "1001M"}),
     "p0, p1, d0, d1: hugepages_target 1001M is not a multiple of the page size 2M"),
]


@pytest.mark.parametrize("name,broken,expected", [c for c in CASES if c[2]], ids=[c[0] for c in CASES if c[2]])
def test_broken_inventory_fails_with_its_message(tmp_path, name, broken, expected):
    proc = validate(make_inventory(tmp_path, **broken))
    assert proc.returncode != 0
    items = problems(proc)
    assert len(items) == 1 and items[0].startswith(expected), items
    assert "node.invalid" not in proc.stdout  # no node was contacted


def test_tp_times_local_above_npus(tmp_path):
    items = problems(validate(make_inventory(tmp_path, **dict(CASES[5][1]))))
    assert items == ["p0, p1: vllm_prefill_tp_size 16 x vllm_dp_size_local 2 = 32 NPUs, but the node has 16 "
                     "(a3_npus_per_node): lower tp or dp_size_local",
                     "d0, d1: vllm_decode_tp_size 16 x vllm_dp_size_local 2 = 32 NPUs, but the node has 16 "
                     "(a3_npus_per_node): lower tp or dp_size_local"]


def test_kv_ranges_of_two_instances_overlap_api_ports(tmp_path):
    items = problems(validate(make_inventory(tmp_path, **dict(CASES[8][1]))))
    # API ports 30008/30009 fall inside the prefill kv ranges (30000-30007, 30008-30015 ...)
    assert any(i.startswith("p0: vllm API port of dp rank 0 (vllm_api_port) [30008-30008] overlaps Mooncake kv ports "
                            "of dp rank 1") for i in items), items
    assert all("overlaps" in i or "same port" in i for i in items), items


def test_every_problem_in_one_run(tmp_path):
    hosts = with_host(p0={"a3_business_ip": "<节点0业务IP>"}, d1={"a3_nic_name": "<业务网卡名>"})
    items = problems(validate(make_inventory(tmp_path, hosts=hosts, group_vars={"vllm_prefill_tp_size": 8})))
    assert len(items) == 3, items


def test_valid_inventory_passes_with_the_seed_warning(tmp_path):
    proc = validate(make_inventory(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "inside Mooncake's random port band [20000, 36000)" in proc.stdout + proc.stderr


def test_dp_groups_that_do_not_divide_a_side(tmp_path):
    """vllm_<side>_dp_groups reaches validation from group_vars; a split that leaves groups of unequal size fails."""
    proc = validate(make_inventory(tmp_path, group_vars={"vllm_prefill_dp_groups": 2, "vllm_decode_dp_groups": 3}))
    assert proc.returncode != 0
    assert problems(proc) == [
        "d0: vllm_decode_dp_groups is 3 but the decode group has 2 hosts (d0, d1): the hosts must divide evenly into "
        "groups of the same size (consecutive hosts in inventory order form a group); set vllm_decode_dp_groups to "
        "one of 1, 2, or add/remove decode hosts"]
    assert "node.invalid" not in proc.stdout
