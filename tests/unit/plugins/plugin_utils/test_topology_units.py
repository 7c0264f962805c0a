# -*- coding: utf-8 -*-
"""_topology's small helpers: sizes as the inventory writes them, the side of a host, and the per-side values
(instances per node, DP groups and how a side's hosts are cut into them), with literal expected values."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T


@pytest.mark.parametrize("value,size", [
    ("500G", 536870912000), ("1T", 1099511627776), ("2048 kB", 2097152), ("2M", 2097152), (4096, 4096),
    ("128MiB", 134217728), ("4096", 4096), (" 3 g ", 3221225472), ("7k", 7168), ("1t", 1099511627776),
    ("5GB", 5368709120), ("5Gb", 5368709120), ("6 m", 6291456), ("1024b", 1024), (0, 0),
])
def test_parse_size(value, size):
    assert T.parse_size(value) == size


@pytest.mark.parametrize("value", ["lots", "", "5X", "G", "1.5G", "-1G", "5 GiBs", True, None])
def test_parse_size_refuses_what_is_not_a_size(value):
    with pytest.raises(ValueError) as err:
        T.parse_size(value)
    assert str(err.value) == "cannot read size %r: use a number with a unit, e.g. 500G, 1T, 128M" % (value,)


@pytest.mark.parametrize("value,gib,mib,docker", [
    ("500G", 500, 512000, "500g"), ("1T", 1024, 1048576, "1024g"), ("1536M", 1, 1536, "1536m"),
    ("2047M", 1, 2047, "2047m"), ("128M", 0, 128, "128m"), ("3G", 3, 3072, "3g"), ("1023k", 0, 0, "0m"),
    # beyond a float's 53 bits: whole numbers stay exact
    ("9007199254740993G", 9007199254740993, 9223372036854776832, "9007199254740993g"),
    ("9007199254740993M", 8796093022208, 9007199254740993, "9007199254740993m"),
])
def test_whole_gib_mib_and_the_docker_size(value, gib, mib, docker):
    assert (T.size_gib(value), T.size_mib(value), T.docker_size(value)) == (gib, mib, docker)


GROUPS = {"prefill": ["p0", "p1"], "decode": ["d0", "d1", "p1"], "etcd": ["e0"], "proxy": None}


@pytest.mark.parametrize("host,side", [
    ("p0", "prefill"), ("d0", "decode"), ("p1", None), ("e0", None), ("x9", None)])
def test_side_of_a_host(host, side):
    assert T.side_of(GROUPS, host) == side


def test_side_of_with_a_side_that_is_not_set():
    assert T.side_of({"decode": ["d0"]}, "d0") == "decode"
    assert T.side_of({"prefill": None, "decode": ["d0"]}, "d0") == "decode"


@pytest.mark.parametrize("values,side,local,key", [
    ({"vllm_dp_size_local": 1}, "prefill", 1, "vllm_dp_size_local"),
    ({"vllm_dp_size_local": "2", "vllm_prefill_dp_size_local": None}, "prefill", 2, "vllm_dp_size_local"),
    ({"vllm_dp_size_local": 1, "vllm_prefill_dp_size_local": "4"}, "prefill", 4, "vllm_prefill_dp_size_local"),
    ({"vllm_dp_size_local": 1, "vllm_prefill_dp_size_local": 4}, "decode", 1, "vllm_dp_size_local"),
    ({"vllm_dp_size_local": 3, "vllm_decode_dp_size_local": 0}, "decode", 0, "vllm_decode_dp_size_local"),
])
def test_instances_per_node_of_a_side_and_where_it_came_from(values, side, local, key):
    assert (T.side_local(values, side), T.side_local_key(values, side)) == (local, key)


@pytest.mark.parametrize("values,side,groups", [
    ({}, "prefill", 1), ({"vllm_prefill_dp_groups": None}, "prefill", 1), ({"vllm_prefill_dp_groups": "2"}, "prefill", 2),
    ({"vllm_prefill_dp_groups": 4}, "decode", 1), ({"vllm_decode_dp_groups": 0}, "decode", 0),
])
def test_dp_groups_of_a_side(values, side, groups):
    assert T.side_groups(values, side) == groups


@pytest.mark.parametrize("members,count,parts", [
    (["a", "b", "c", "d"], 1, [["a", "b", "c", "d"]]),
    (["a", "b", "c", "d"], 2, [["a", "b"], ["c", "d"]]),
    (["a", "b", "c", "d"], 4, [["a"], ["b"], ["c"], ["d"]]),
    (["a", "b", "c", "d", "e", "f"], 3, [["a", "b"], ["c", "d"], ["e", "f"]]),
])
def test_split_groups_cuts_consecutive_equal_groups(members, count, parts):
    assert T.split_groups(members, count) == parts
