# -*- coding: utf-8 -*-
"""plugins/module_utils/_kv_transfer.py, pinned exactly: the whole messages of every refusal (each alone and
together), the edges of the port range and of the sizes, the plain Mooncake config with the pool off, the ports
and ranks of a host's instances and the notes."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _kv_transfer as K

MOONCAKE = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
SMALL = {"prefill": {"dp_size": 1, "tp_size": 1}, "decode": {"dp_size": 1, "tp_size": 1}}


def message(**kwargs):
    args = dict(side="prefill", kv_port=30000, mooncake=MOONCAKE, lookup_rpc_port=0, dp_size=2, tp_size=16)
    args.update(kwargs)
    with pytest.raises(K.KvConfigError) as err:
        K.build(**args)
    return str(err.value)


def test_kv_config_error_is_a_value_error():
    assert issubclass(K.KvConfigError, ValueError)


def test_roles_and_pool_backends():
    assert K.ROLES == {"prefill": "kv_producer", "decode": "kv_consumer"}
    assert K.POOL_BACKENDS_V0180 == ("mooncake", "memcache")
    assert (K.FILE_NAME, K.FILE_MODE) == ("kv_transfer_config_dp%d.json", "0644")


@pytest.mark.parametrize("kv_port, ok", [(65535, True), (65536, False), (1, True), (0, False)])
def test_kv_port_edges_of_one_instance_of_tp_1(kv_port, ok):
    if ok:
        cfg = K.build("decode", kv_port, SMALL, 0, 1, 1, pool_enabled=False)
        assert cfg["kv_port"] == str(kv_port)
    else:
        assert message(side="decode", kv_port=kv_port, mooncake=SMALL, dp_size=1, tp_size=1) == (
            "kv_port %d is not a usable TCP port for 1 instances x tp 1" % kv_port)


def test_a_size_of_one_is_positive():
    assert K.check_mooncake(SMALL, "prefill", 1, 1) == []


@pytest.mark.parametrize("mooncake, want", [
    ({"prefill": None, "decode": {"dp_size": 1, "tp_size": 1}},
     ["mooncake.prefill.dp_size must be a positive integer, got None",
      "mooncake.prefill.tp_size must be a positive integer, got None"]),
    ({"prefill": {"dp_size": 1, "tp_size": 1}, "decode": {"dp_size": 1, "tp_size": 0}},
     ["mooncake.decode.tp_size must be a positive integer, got 0"]),
    ({"prefill": {"dp_size": 1, "tp_size": 2}, "decode": {"dp_size": 1, "tp_size": 2}}, []),
    ({"prefill": {"dp_size": 1, "tp_size": 1}, "decode": {"dp_size": 1, "tp_size": 2}},
     ["prefill tp_size 1 < decode tp_size 2: Mooncake requires prefill tp >= decode tp",
      "mooncake.prefill says dp 1 / tp 1 but this prefill instance runs dp 1 / tp 2"]),
])
def test_check_mooncake(mooncake, want):
    assert K.check_mooncake(mooncake, "prefill", 1, 2) == want


@pytest.mark.parametrize("own, want", [
    ((2, 16), []),
    ((1, 16), ["mooncake.decode says dp 2 / tp 16 but this decode instance runs dp 1 / tp 16"]),
    ((2, 8), ["mooncake.decode says dp 2 / tp 16 but this decode instance runs dp 2 / tp 8"]),
])
def test_check_mooncake_compares_dp_and_tp_of_the_own_side(own, want):
    mooncake = {"prefill": {"dp_size": 1, "tp_size": 32}, "decode": {"dp_size": 2, "tp_size": 16}}
    assert K.check_mooncake(mooncake, "decode", *own) == want


@pytest.mark.parametrize("kwargs, want", [
    ({"mooncake_extra": {"decode": 1, "prefill": 2, "x": 3}},
     "mooncake_extra may not set prefill, decode (computed from the topology)"),
    ({"pool_extra": {"backend": 1, "lookup_rpc_port": 2}},
     "pool_extra may not set lookup_rpc_port, backend (computed from the topology)"),
    ({"top_level_extra": {"kv_connector_extra_config": 1, "engine_id": 2, "kv_role": 3, "kv_connector": 4}},
     "top_level_extra may not set kv_connector, kv_role, engine_id, kv_connector_extra_config (computed from the "
     "topology)"),
    ({"pool_enabled": None}, "pool_enabled must be true or false, got None"),
    ({"pool_enabled": 0}, "pool_enabled must be true or false, got 0"),
    ({"pool_enabled": False, "pool_extra": {"a": 1}},
     "pool_extra {'a': 1} is set but the KV pool is off (pool_enabled false): no AscendStoreConnector would read it"),
    ({"pool_enabled": False, "top_level_extra": {"kv_connector_module_path": "m", "kv_port": "1"}},
     "top_level_extra may not set kv_port, kv_connector_module_path with the pool off (the Mooncake connector's own "
     "keys are the top level then)"),
    ({"pool_enabled": False, "top_level_extra": {"kv_port": "1"}},
     "top_level_extra may not set kv_port with the pool off (the Mooncake connector's own keys are the top level "
     "then)"),
    ({"side": "Prefill"}, "side must be 'prefill' or 'decode', got 'Prefill'"),
    ({"side": None}, "side must be 'prefill' or 'decode', got None"),
    ({"kv_port": False}, "kv_port False is not a usable TCP port for 2 instances x tp 16"),
    ({"kv_port": 30000.0}, "kv_port 30000.0 is not a usable TCP port for 2 instances x tp 16"),
])
def test_build_refuses_with_the_whole_message(kwargs, want):
    assert message(**kwargs) == want


def test_every_problem_of_the_extras_in_one_message():
    assert message(mooncake_extra={"prefill": 1}, pool_extra={"backend": 1}, top_level_extra={"kv_port": 1},
                   pool_enabled=False) == (
        "mooncake_extra may not set prefill (computed from the topology); "
        "pool_extra may not set backend (computed from the topology); "
        "pool_extra {'backend': 1} is set but the KV pool is off (pool_enabled false): no AscendStoreConnector "
        "would read it; "
        "top_level_extra may not set kv_port with the pool off (the Mooncake connector's own keys are the top level "
        "then)")


def test_empty_extras_are_no_extras_with_the_pool_off():
    cfg = K.build("decode", 30100, MOONCAKE, 0, 2, 16, pool_enabled=False, pool_extra={}, top_level_extra={},
                  mooncake_extra={}, engine_id=0, mooncake_module_path="m.p")
    assert cfg == {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer", "kv_port": "30100",
                   "engine_id": "0", "kv_connector_module_path": "m.p",
                   "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 16},
                                                 "decode": {"dp_size": 2, "tp_size": 16}}}
    assert list(cfg) == ["kv_connector", "kv_role", "kv_port", "engine_id", "kv_connector_module_path",
                         "kv_connector_extra_config"]


def test_pool_off_top_level_extra_comes_before_the_extra_config_and_other_keys_pass():
    cfg = K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_enabled=False, top_level_extra={"a": 1})
    assert list(cfg) == ["kv_connector", "kv_role", "kv_port", "a", "kv_connector_extra_config"]


def test_pool_on_whole_config_with_every_option():
    cfg = K.build("decode", 30100, MOONCAKE, 5, 2, 16, engine_id="e", pool_backend="memcache",
                  mooncake_extra={"m": 1}, mooncake_module_path="m.p", pool_extra={"p": 2}, top_level_extra={"t": 3})
    assert cfg == {
        "kv_connector": "MultiConnector", "kv_role": "kv_consumer", "engine_id": "e", "t": 3,
        "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer", "kv_port": "30100",
             "kv_connector_module_path": "m.p",
             "kv_connector_extra_config": {"m": 1, "prefill": {"dp_size": 2, "tp_size": 16},
                                           "decode": {"dp_size": 2, "tp_size": 16}}},
            {"kv_connector": "AscendStoreConnector", "kv_role": "kv_consumer",
             "kv_connector_extra_config": {"lookup_rpc_port": "5", "backend": "memcache", "p": 2}}]}}


@pytest.mark.parametrize("ports, want", [
    ([], "lookup_rpc_ports must be a non-empty list (one per instance), got []"),
    ((), "lookup_rpc_ports must be a non-empty list (one per instance), got ()"),
    (None, "lookup_rpc_ports must be a non-empty list (one per instance), got None"),
    ({"0": 1}, "lookup_rpc_ports must be a non-empty list (one per instance), got {'0': 1}"),
    (["3", 1, "1", 3, "2"], "lookup_rpc_port 1, 3 repeats on the host: its instances would share the pool's IPC "
                            "socket"),
])
def test_build_instances_refuses_with_the_whole_message(ports, want):
    with pytest.raises(K.KvConfigError) as err:
        K.build_instances(ports, "decode", 30100, MOONCAKE, 2, 16)
    assert str(err.value) == want


def test_build_instances_of_a_tuple_in_its_order():
    got = K.build_instances((9, "4"), "decode", 30100, SMALL, 1, 1, pool_enabled=True, pool_backend="mooncake")
    assert [(g["lookup_rpc_port"], g["config"]["kv_connector_extra_config"]["connectors"][1]
             ["kv_connector_extra_config"]["lookup_rpc_port"]) for g in got] == [("9", "9"), ("4", "4")]
    assert got[1]["json"] == (
        '{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":['
        '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":"30100","kv_connector_extra_config":'
        '{"prefill":{"dp_size":1,"tp_size":1},"decode":{"dp_size":1,"tp_size":1}}},'
        '{"kv_connector":"AscendStoreConnector","kv_role":"kv_consumer","kv_connector_extra_config":'
        '{"lookup_rpc_port":"4","backend":"mooncake"}}]}}')


@pytest.mark.parametrize("instances, work_dir, want", [
    ([], "rel", "work_dir must be an absolute path, got 'rel'; instances must be a non-empty list (one per engine "
                "instance), got []"),
    ((), "/w", "instances must be a non-empty list (one per engine instance), got ()"),
    (None, "/w", "instances must be a non-empty list (one per engine instance), got None"),
    ([{"dp_rank": "-1", "lookup_rpc_port": 0}], "/w",
     "instance 0 has no dp_rank (a non-negative integer): {'dp_rank': '-1', 'lookup_rpc_port': 0}"),
    ([{"dp_rank": 1.0, "lookup_rpc_port": 0}], "/w",
     "instance 0 has no dp_rank (a non-negative integer): {'dp_rank': 1.0, 'lookup_rpc_port': 0}"),
    ([{"dp_rank": 0, "lookup_rpc_port": 0}, {"dp_rank": False, "lookup_rpc_port": 1}], "/w",
     "instance 1 has no dp_rank (a non-negative integer): {'dp_rank': False, 'lookup_rpc_port': 1}"),
    ([{"dp_rank": 2, "lookup_rpc_port": None}], "/w", "instance 0 (dp rank 2) has no lookup_rpc_port"),
    ([{"dp_rank": 1, "lookup_rpc_port": 0}, {"dp_rank": "1", "lookup_rpc_port": 1}, {"dp_rank": 0, "lookup_rpc_port": 2},
      {"dp_rank": 0, "lookup_rpc_port": 3}, {"dp_rank": 4, "lookup_rpc_port": 4}], "/w",
     "dp ranks 0, 1 repeat: two instances would write the same kv_transfer_config_dp0.json"),
    ([{"dp_rank": 3, "lookup_rpc_port": 0}, {"dp_rank": 3}], 5,
     "work_dir must be an absolute path, got 5; instance 1 (dp rank 3) has no lookup_rpc_port; "
     "dp ranks 3 repeat: two instances would write the same kv_transfer_config_dp3.json"),
])
def test_check_instances_refuses_with_the_whole_message(instances, work_dir, want):
    with pytest.raises(K.KvConfigError) as err:
        K.check_instances(instances, work_dir)
    assert str(err.value) == want


def test_check_instances_gives_the_ranks_in_order():
    assert K.check_instances([{"dp_rank": "10", "lookup_rpc_port": 0}, {"dp_rank": 0, "lookup_rpc_port": "0"}],
                             "/") == [10, 0]
    assert K.check_instances(({"dp_rank": 1, "lookup_rpc_port": 0},), "/w") == [1]


def test_instance_files_whole():
    got = K.instance_files([{"dp_rank": 1, "lookup_rpc_port": 7}], "/w//", "prefill", 30000, SMALL, 1, 1,
                           pool_enabled=False)
    text = ('{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":"30000",'
            '"kv_connector_extra_config":{"prefill":{"dp_size":1,"tp_size":1},"decode":{"dp_size":1,"tp_size":1}}}')
    assert got == {"files": [{"dest": "/w/kv_transfer_config_dp1.json", "content": text + "\n", "mode": "0644"}],
                   "by_rank": {"1": text}, "notes": []}
    assert K.instance_files([{"dp_rank": 2, "lookup_rpc_port": 7}], "/data/X", "prefill", 30000, SMALL, 1, 1)[
        "files"][0]["dest"] == "/data/X/kv_transfer_config_dp2.json"
    with_pool = K.instance_files([{"dp_rank": 0, "lookup_rpc_port": 7}], "/", "prefill", 30000, SMALL, 1, 1)
    assert with_pool["files"][0]["dest"] == "/kv_transfer_config_dp0.json"
    assert with_pool["notes"] == ["pool backend 'yuanrong' is not in vllm-ascend v0.18.0 (only mooncake, memcache): "
                                  "the yuanrong backend patch must be applied (role patches)"]


@pytest.mark.parametrize("config, want", [
    ({"kv_connector": "AscendStoreConnector", "kv_connector_extra_config": {}},
     ["pool backend None is not in vllm-ascend v0.18.0 (only mooncake, memcache): the yuanrong backend patch must be "
      "applied (role patches)"]),
    ({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "AscendStoreConnector"},
        {"kv_connector": "AscendStoreConnector", "kv_connector_extra_config": {"backend": "memcache"}},
        {"kv_connector": "MooncakeConnectorV1", "kv_connector_extra_config": {"backend": "x"}}]}},
     ["pool backend None is not in vllm-ascend v0.18.0 (only mooncake, memcache): the yuanrong backend patch must be "
      "applied (role patches)"]),
    ({"kv_connector": "AscendStoreConnector", "kv_connector_extra_config": {"backend": "mooncake"}}, []),
    ({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": []}}, []),
])
def test_notes(config, want):
    assert K.notes(config) == want
