# -*- coding: utf-8 -*-
"""_render: the corners of the render plan the main suite (test_render.py) leaves open - names that start with the
characters a strip could eat, the shell variable of the datasystem worker address, integers beyond a float's
precision, several members per restart reason, and the log offset of outputs that do not end with a newline."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import (
    engine_processes, expand, jinja_int, restart_reasons, start_log_offset)


@pytest.mark.parametrize("value,expanded", [
    ("$XDG", "xdg"), ("${XDG}", "xdg"), ("$DG", "dg"), ("${X}", "x"), ("$X_", "$X_"),
])
def test_expand_reads_the_whole_name(value, expanded):
    assert expand(value, {"XDG": "xdg", "DG": "dg", "X": "x"}) == expanded


def test_engine_processes_expand_the_worker_address_variable():
    me = {"dp_size": 1, "tp_size": 2, "dp_address": "10.0.0.11", "dp_rpc_port": 10521, "nic_name": "eth0",
          "business_ip": "10.0.0.11", "instances": [{"dp_rank": 0, "devices": [0, 1], "api_port": 6700}]}
    procs = engine_processes(me, {"DS_WORKER_ADDR": "$ds_worker_addr", "IP": "$local_ip", "NIC": "${nic_name}"}, {},
                             {0: "kv"}, "/m", "0.0.0.0", "10.0.0.11:18481")
    assert procs == [{
        "name": "vllm serve (dp rank 0)",
        "argv": ["vllm", "serve", "/m", "--host", "0.0.0.0", "--port", "6700", "--data-parallel-size", "1",
                 "--data-parallel-rank", "0", "--data-parallel-address", "10.0.0.11", "--data-parallel-rpc-port",
                 "10521", "--tensor-parallel-size", "2", "--kv-transfer-config", "kv"],
        "env": {"DS_WORKER_ADDR": "10.0.0.11:18481", "IP": "10.0.0.11", "NIC": "eth0"},
        "started_by": "launch_online_dp.py"}]


@pytest.mark.parametrize("value,want", [
    (12345678901234567891, 12345678901234567891), ("12345678901234567891", 12345678901234567891), ("1e3", 1000),
])
def test_jinja_int_keeps_every_digit_of_an_integer(value, want):
    assert jinja_int(value) == want


def test_restart_reasons_list_every_member_of_a_reason():
    facts = {"p0": {"vllm_launcher_changed": True, "vllm_running": False},
             "p1": {"vllm_launcher_changed": True, "vllm_running": False}}
    assert restart_reasons(["p0", "p1"], facts, ["p0", "p1"]) == [
        "launch_online_dp.py differs from the image's on p0, p1", "not running on p0, p1"]


@pytest.mark.parametrize("outputs,offset", [
    # Ansible strips a registered stdout's last newline: the next output's digits are not part of the number
    (["started, log offset 5", "7 instances started"], 5),
    (["log offset 1", "", "2"], 1),
    (["log offset 1", None, "2"], 1),
    (["no offset here", "log offset 42"], 42),
])
def test_the_log_offset_is_read_from_one_output(outputs, offset):
    assert start_log_offset(outputs, 0) == offset
