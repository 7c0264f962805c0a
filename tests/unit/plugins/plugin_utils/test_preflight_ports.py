# -*- coding: utf-8 -*-
"""_preflight: the port check's corners - a port of one service that equals another's (the wording follows the
variable, not the number), the IPv4-mapped business address, a python listener whose command line ps did not show -
and LooseVersion's components (a doubled dot, letters), with whole messages."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import (
    judge_host_read, version_below, wanted_ports)

from test_preflight_host import NODE, cmdlines, listeners, port, read, settings

PORTS = {"yuanrong_worker_port": 18481, "etcd_client_port": 2379, "etcd_peer_port": 2380, "proxy_port": 8088,
         "proxy_admin_port": 8089}
MEMBER = dict(NODE, dp_rank_start=2, is_etcd_host=False, is_proxy_host=False)


def test_a_worker_port_equal_to_an_api_port_keeps_its_own_wording():
    assert wanted_ports(MEMBER, dict(PORTS, yuanrong_worker_port=9001), True) == [
        {"first": 9000, "last": 9000, "any": True, "what": "vLLM API port of dp rank 0 (vllm_api_port)"},
        {"first": 30000, "last": 30007, "any": False,
         "what": "Mooncake kv ports 30000-30007 of dp rank 0 (vllm_prefill_kv_port + rank x tp)"},
        {"first": 9001, "last": 9001, "any": True, "what": "vLLM API port of dp rank 1 (vllm_api_port)"},
        {"first": 30008, "last": 30015, "any": False,
         "what": "Mooncake kv ports 30008-30015 of dp rank 1 (vllm_prefill_kv_port + rank x tp)"},
        {"first": 9001, "last": 9001, "any": False, "what": "openYuanrong worker port (yuanrong_worker_port)"}]


def test_a_worker_port_equal_to_a_one_port_kv_range_keeps_its_own_wording():
    node = dict(MEMBER, side="decode", tp_size=1, instances=[
        {"local_rank": 0, "dp_rank": 2, "api_port": 9000, "devices": [0], "kv_ports": [30002, 30002],
         "lookup_rpc_port": 2}])
    assert wanted_ports(node, dict(PORTS, yuanrong_worker_port=30002), False) == [
        {"first": 9000, "last": 9000, "any": False, "what": "vLLM API port of dp rank 2 (vllm_api_port)"},
        {"first": 30002, "last": 30002, "any": False,
         "what": "Mooncake kv ports 30002-30002 of dp rank 2 (vllm_decode_kv_port + rank x tp)"},
        {"first": 30002, "last": 30002, "any": False, "what": "openYuanrong worker port (yuanrong_worker_port)"}]


def test_a_foreign_listener_on_the_ipv4_mapped_business_address_clashes():
    result = read(listeners=listeners('LISTEN 0 5 [::ffff:10.0.0.11]:18481 *:* users:(("nc",pid=8,fd=3))'))
    assert judge_host_read(result, settings())["problems"] == [
        port(18481, "openYuanrong worker port (yuanrong_worker_port)", "::ffff:10.0.0.11", "nc (pid 8)",
             "yuanrong_worker_port")]


def test_a_python_listener_without_a_command_line_is_foreign():
    result = read(listeners=listeners('LISTEN 0 5 10.0.0.11:18481 0.0.0.0:* users:(("python3",pid=4343,fd=3))'),
                  cmdlines=cmdlines("   4242 python3 datasystem_worker"))
    assert judge_host_read(result, settings())["problems"] == [
        port(18481, "openYuanrong worker port (yuanrong_worker_port)", "10.0.0.11", "python3 (pid 4343)",
             "yuanrong_worker_port")]


@pytest.mark.parametrize("found,minimum,below", [
    ("1..2", "1.2", False), ("1.2", "1..2", False), ("1..2", "1.3", True),
    ("8.5.rc1", "8.5.rc2", True), ("8.5.rc2", "8.5.rc1", False), ("1.0a", "1.0b", True), ("1.0b", "1.0b", False),
])
def test_versions_compare_by_their_loose_components(found, minimum, below):
    assert version_below(found, minimum) is below
