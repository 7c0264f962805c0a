# -*- coding: utf-8 -*-
"""The validate_inventory action plugin: ActionModule.run on a fake task, with hostvars and groups as Ansible
passes them (hostvars hold what the inventory sets; the roles' defaults fill the rest)."""
from __future__ import annotations

import copy

from ansible_collections.ascend.vllm_pd.plugins.action.validate_inventory import ActionModule

GROUPS = {"all": ["p0", "p1", "d0", "d1", "localhost"], "prefill": ["p0", "p1"], "decode": ["d0", "d1"],
          "ungrouped": ["localhost"]}
HOSTS = {"p0": {"a3_business_ip": "192.0.2.11", "a3_nic_name": "bond0"},
         "p1": {"a3_business_ip": "192.0.2.12", "a3_nic_name": "bond0"},
         "d0": {"a3_business_ip": "192.0.2.13", "a3_nic_name": "bond0"},
         "d1": {"a3_business_ip": "192.0.2.14", "a3_nic_name": "bond0"},
         "localhost": {}}


class FakeTask:
    action = "ascend.vllm_pd.validate_inventory"
    async_val = 0
    check_mode = False

    def __init__(self, args):
        self.args = args


class FakeShell:
    tmpdir = "/nonexistent"  # set: the action needs no remote temporary directory


class FakeConnection:
    _shell = FakeShell()


def run(args=None, **host_changes):
    hostvars = copy.deepcopy(HOSTS)
    for host, values in host_changes.items():
        hostvars[host].update(values)
    action = ActionModule(FakeTask(args or {}), FakeConnection(), None, None, None)
    return action.run(task_vars={"hostvars": hostvars, "groups": GROUPS, "inventory_hostname": "localhost"})


def test_an_inventory_of_hosts_alone_is_valid_with_the_seed_warnings():
    result = run()
    assert not result.get("failed") and result["changed"] is False and result["errors"] == []
    assert result["msg"] == "inventory is valid (%d warning(s))" % len(result["inventory_warnings"])
    assert result["warnings"] == result["inventory_warnings"]
    assert any("inside Mooncake's random port band" in w for w in result["warnings"])


def test_a_problem_fails_naming_host_variable_and_what_to_set():
    result = run(p1={"a3_business_ip": "<节点1业务IP>"})
    assert result["failed"] is True
    assert result["msg"] == ("The inventory has 1 problem(s); nothing was changed on any node:\n- p1: a3_business_ip "
                             "is still the placeholder '<节点1业务IP>': set it to the node's business IP")


def test_placeholders_are_warnings_in_render_mode():
    result = run({"allow_placeholders": "yes"}, d1={"a3_nic_name": "<业务网卡名>"})
    assert not result.get("failed")
    assert "d1: a3_nic_name is still the placeholder '<业务网卡名>': set it to the business NIC name (e.g. enp3s0, " \
           "bond0)" in result["warnings"]


def test_every_problem_at_once_from_hostvars_over_the_role_defaults():
    result = run(p0={"a3_nic_name": "enp3s0f0np0-bond7", "vllm_health_timeout": 0},
                 d0={"a3_business_ip": "224.0.0.5", "vllm_decode_serve_args": {"enforce-eager": "true"}})
    problems = result["msg"].split("\n- ")[1:]
    assert result["failed"] is True and len(problems) == 4, problems
    assert "p0: a3_nic_name 'enp3s0f0np0-bond7' is 17 characters long, Linux allows at most 15 (HCCL, Gloo and " \
           "preflight use it as an interface name): set it to the business NIC name (e.g. enp3s0, bond0)" in problems
    assert "d0: a3_business_ip 224.0.0.5 is a multicast address, which no node owns: set the node's own business " \
           "IP, e.g. 10.0.0.11" in problems
    assert "p0: vllm_health_timeout is 0: set an integer >= 1" in problems
    assert any(p.startswith("d0: vllm_decode_serve_args is {'enforce-eager': 'true'}: vllm serve takes "
                            "--enforce-eager without a value") for p in problems)


def test_a_placement_value_set_on_one_host():
    result = run(d1={"a3_proxy_host": "d0"})
    assert result["failed"] is True
    assert "p0, p1, d0, d1: a3_proxy_host differs between the hosts (p0='', p1='', d0='', d1='d0')" in result["msg"]
