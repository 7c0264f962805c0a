# -*- coding: utf-8 -*-
"""plugins/module_utils/_kv_transfer.py: the --kv-transfer-config of one engine instance (pure)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _kv_transfer as K

MOONCAKE = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}

# The seed's prefill dp0 and decode dp1 configs, as the golden render writes them (tests/golden/a3).
SEED_PREFILL_DP0 = (
    '{"kv_connector":"MultiConnector","kv_role":"kv_producer","engine_id":"0","kv_connector_extra_config":'
    '{"connectors":[{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":"30000",'
    '"kv_connector_module_path":"vllm_ascend.distributed.mooncake_connector","kv_connector_extra_config":'
    '{"use_ascend_direct":true,"prefill":{"dp_size":2,"tp_size":16},"decode":{"dp_size":2,"tp_size":16}}},'
    '{"kv_connector":"AscendStoreConnector","kv_role":"kv_producer","kv_connector_extra_config":'
    '{"lookup_rpc_port":"0","backend":"yuanrong"}}]}}')
SEED_DECODE_DP1 = (
    '{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":'
    '{"connectors":[{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":"30100",'
    '"kv_connector_module_path":"vllm_ascend.distributed.mooncake_connector","kv_connector_extra_config":'
    '{"use_ascend_direct":true,"prefill":{"dp_size":2,"tp_size":16},"decode":{"dp_size":2,"tp_size":16}}},'
    '{"kv_connector":"AscendStoreConnector","kv_role":"kv_consumer","kv_connector_extra_config":'
    '{"lookup_rpc_port":"1","backend":"yuanrong"}}]}}')
MODULE_PATH = "vllm_ascend.distributed.mooncake_connector"


def seed_like(side, kv_port, lookup, engine_id=None):
    return K.build(side, kv_port, MOONCAKE, lookup, 2, 16, engine_id=engine_id,
                   mooncake_extra={"use_ascend_direct": True}, mooncake_module_path=MODULE_PATH)


def test_prefill_and_decode_reproduce_the_seed_text_exactly():
    assert K.to_json(seed_like("prefill", 30000, 0, engine_id=0)) == SEED_PREFILL_DP0
    assert K.to_json(seed_like("decode", 30100, "1")) == SEED_DECODE_DP1


def test_minimal_config_shape_and_roles():
    prefill = K.build("prefill", 30000, MOONCAKE, 0, 2, 16)
    assert prefill == {
        "kv_connector": "MultiConnector", "kv_role": "kv_producer",
        "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": "30000",
             "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 16},
                                           "decode": {"dp_size": 2, "tp_size": 16}}},
            {"kv_connector": "AscendStoreConnector", "kv_role": "kv_producer",
             "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}},
        ]},
    }
    decode = K.build("decode", 30100, MOONCAKE, 3, 2, 16)
    assert [decode["kv_role"]] + [c["kv_role"] for c in decode["kv_connector_extra_config"]["connectors"]] == \
        ["kv_consumer"] * 3
    # key order is part of the output (to_json keeps it): engine_id before the connectors
    assert list(K.build("prefill", 30000, MOONCAKE, 0, 2, 16, engine_id="p")) == \
        ["kv_connector", "kv_role", "engine_id", "kv_connector_extra_config"]


def test_ports_and_engine_id_are_strings_and_engine_id_none_is_omitted():
    cfg = K.build("prefill", 30000, MOONCAKE, 7, 2, 16, engine_id=0)
    assert cfg["engine_id"] == "0"
    mc, store = cfg["kv_connector_extra_config"]["connectors"]
    assert mc["kv_port"] == "30000" and store["kv_connector_extra_config"]["lookup_rpc_port"] == "7"
    assert "engine_id" not in K.build("decode", 30100, MOONCAKE, 0, 2, 16, engine_id=None)
    assert K.build("decode", 30100, MOONCAKE, 0, 2, 16, engine_id="")["engine_id"] == ""


def test_module_path_only_when_set():
    with_path = K.build("decode", 30100, MOONCAKE, 0, 2, 16, mooncake_module_path="x.y")
    mc = with_path["kv_connector_extra_config"]["connectors"][0]
    assert list(mc) == ["kv_connector", "kv_role", "kv_port", "kv_connector_module_path", "kv_connector_extra_config"]
    assert mc["kv_connector_module_path"] == "x.y"
    for empty in (None, ""):
        mc = K.build("decode", 30100, MOONCAKE, 0, 2, 16, mooncake_module_path=empty)["kv_connector_extra_config"][
            "connectors"][0]
        assert "kv_connector_module_path" not in mc


def test_extra_config_merge_and_backend_choice():
    cfg = K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_backend="mooncake",
                  mooncake_extra={"use_ascend_direct": True, "timeout": 30},
                  pool_extra={"load_async": True, "consumer_is_to_put": False},
                  top_level_extra={"kv_load_failure_policy": "recompute"})
    mc, store = cfg["kv_connector_extra_config"]["connectors"]
    # the extras come first, the topology's blocks after them
    assert list(mc["kv_connector_extra_config"]) == ["use_ascend_direct", "timeout", "prefill", "decode"]
    assert store["kv_connector_extra_config"] == {"lookup_rpc_port": "0", "backend": "mooncake", "load_async": True,
                                                  "consumer_is_to_put": False}
    assert list(cfg) == ["kv_connector", "kv_role", "kv_load_failure_policy", "kv_connector_extra_config"]
    assert cfg["kv_load_failure_policy"] == "recompute"


def test_inputs_are_not_shared_with_the_output():
    mooncake = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    extra = {"use_ascend_direct": True}
    cfg = K.build("prefill", 30000, mooncake, 0, 2, 16, mooncake_extra=extra)
    mc_extra = cfg["kv_connector_extra_config"]["connectors"][0]["kv_connector_extra_config"]
    mc_extra["prefill"]["tp_size"] = 1
    mc_extra["new"] = 1
    assert mooncake["prefill"]["tp_size"] == 16 and extra == {"use_ascend_direct": True}


@pytest.mark.parametrize("name,extra,key", [
    ("mooncake_extra", {"prefill": {"dp_size": 1, "tp_size": 1}}, "prefill"),
    ("mooncake_extra", {"decode": {}}, "decode"),
    ("pool_extra", {"lookup_rpc_port": "9"}, "lookup_rpc_port"),
    ("pool_extra", {"backend": "memcache"}, "backend"),
    ("top_level_extra", {"kv_role": "kv_both"}, "kv_role"),
    ("top_level_extra", {"kv_connector": "MooncakeConnectorV1"}, "kv_connector"),
    ("top_level_extra", {"engine_id": "9"}, "engine_id"),
    ("top_level_extra", {"kv_connector_extra_config": {}}, "kv_connector_extra_config"),
])
def test_an_extra_may_not_replace_a_computed_key(name, extra, key):
    # before: top_level_extra {kv_role: kv_both} silently gave a MultiConnector whose role differs from its
    # connectors', pool_extra replaced the per-instance lookup_rpc_port, mooncake_extra's blocks were dropped
    with pytest.raises(K.KvConfigError) as err:
        K.build("prefill", 30000, MOONCAKE, 0, 2, 16, **{name: extra})
    assert str(err.value) == "%s may not set %s (computed from the topology)" % (name, key)


def test_side_must_be_prefill_or_decode():
    with pytest.raises(K.KvConfigError, match=r"^side must be 'prefill' or 'decode', got 'both'$"):
        K.build("both", 30000, MOONCAKE, 0, 2, 16)


def test_own_dp_tp_must_match_the_mooncake_block():
    with pytest.raises(K.KvConfigError) as err:
        K.build("decode", 30100, MOONCAKE, 0, 4, 8)
    assert str(err.value) == "mooncake.decode says dp 2 / tp 16 but this decode instance runs dp 4 / tp 8"


def test_prefill_tp_below_decode_tp_is_refused():
    mooncake = {"prefill": {"dp_size": 4, "tp_size": 8}, "decode": {"dp_size": 2, "tp_size": 16}}
    assert K.check_mooncake(mooncake, "prefill", 4, 8) == [
        "prefill tp_size 8 < decode tp_size 16: Mooncake requires prefill tp >= decode tp"]
    mooncake = {"prefill": {"dp_size": 1, "tp_size": 16}, "decode": {"dp_size": 4, "tp_size": 4}}
    assert K.check_mooncake(mooncake, "decode", 4, 4) == []


@pytest.mark.parametrize("bad", [None, 0, -1, "2", 2.0, True])
def test_block_sizes_must_be_positive_integers(bad):
    mooncake = {"prefill": {"dp_size": bad, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    assert K.check_mooncake(mooncake, "decode", 2, 16) == [
        "mooncake.prefill.dp_size must be a positive integer, got %r" % (bad,)]


def test_missing_blocks_are_reported_field_by_field():
    assert K.check_mooncake({}, "prefill", 2, 16) == [
        "mooncake.%s.%s must be a positive integer, got None" % (k, f)
        for k in ("prefill", "decode") for f in ("dp_size", "tp_size")]


def test_kv_port_range():
    # dp 2 x tp 16: instance ports kv_port .. kv_port + 31, so 65504 is the highest base that fits
    assert K.build("decode", 65504, MOONCAKE, 0, 2, 16)["kv_connector_extra_config"]["connectors"][0][
        "kv_port"] == "65504"
    assert K.build("decode", 1, MOONCAKE, 0, 2, 16)
    for bad in (65505, 0, -5, "30000", None, True):
        with pytest.raises(K.KvConfigError) as err:
            K.build("decode", bad, MOONCAKE, 0, 2, 16)
        assert str(err.value) == "kv_port %r is not a usable TCP port for 2 instances x tp 16" % (bad,)


def test_every_error_in_one_message():
    mooncake = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
    with pytest.raises(K.KvConfigError) as err:
        K.build("prefill", 70000, mooncake, 0, 1, 16, top_level_extra={"kv_role": "x"})
    assert str(err.value) == ("mooncake.prefill says dp 2 / tp 16 but this prefill instance runs dp 1 / tp 16; "
                              "kv_port 70000 is not a usable TCP port for 1 instances x tp 16; "
                              "top_level_extra may not set kv_role (computed from the topology)")


def test_notes_flag_a_pool_backend_v0180_lacks():
    assert K.notes(K.build("prefill", 30000, MOONCAKE, 0, 2, 16)) == [
        "pool backend 'yuanrong' is not in vllm-ascend v0.18.0 (only mooncake, memcache): the yuanrong backend "
        "patch must be applied (role patches)"]
    for backend in ("mooncake", "memcache"):
        assert K.notes(K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_backend=backend)) == []


def test_to_json_is_compact_and_round_trips():
    cfg = seed_like("prefill", 30000, 0, engine_id="0")
    text = K.to_json(cfg)
    assert " " not in text and json.loads(text) == cfg
    assert K.to_json({"a": "ü"}) == '{"a":"\\u00fc"}'


# --- the KV pool toggle (vllm_kv_pool_enabled) ---------------------------------------------------------

def test_pool_off_is_a_plain_mooncake_config_without_the_store_connector():
    cfg = K.build("prefill", 30000, MOONCAKE, 0, 2, 16, engine_id=0, mooncake_extra={"use_ascend_direct": True},
                  mooncake_module_path=MODULE_PATH, top_level_extra={"kv_load_failure_policy": "recompute"},
                  pool_enabled=False)
    assert K.to_json(cfg) == (
        '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":"30000","engine_id":"0",'
        '"kv_connector_module_path":"vllm_ascend.distributed.mooncake_connector",'
        '"kv_load_failure_policy":"recompute","kv_connector_extra_config":'
        '{"use_ascend_direct":true,"prefill":{"dp_size":2,"tp_size":16},"decode":{"dp_size":2,"tp_size":16}}}')
    assert "AscendStoreConnector" not in K.to_json(cfg) and "lookup_rpc_port" not in K.to_json(cfg)
    decode = K.build("decode", 30100, MOONCAKE, 1, 2, 16, pool_enabled=False)
    assert decode == {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer", "kv_port": "30100",
                      "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 16},
                                                    "decode": {"dp_size": 2, "tp_size": 16}}}


def test_pool_on_is_the_default_and_unchanged():
    assert K.to_json(K.build("prefill", 30000, MOONCAKE, 0, 2, 16, engine_id=0, pool_enabled=True,
                             mooncake_extra={"use_ascend_direct": True}, mooncake_module_path=MODULE_PATH)) \
        == SEED_PREFILL_DP0


def test_pool_off_still_checks_the_mooncake_blocks():
    with pytest.raises(K.KvConfigError, match="mooncake.prefill says dp 2 / tp 16"):
        K.build("prefill", 30000, MOONCAKE, 0, 4, 16, pool_enabled=False)


@pytest.mark.parametrize("kwargs,needle", [
    ({"pool_extra": {"load_async": True}}, "pool_extra {'load_async': True} is set but the KV pool is off"),
    ({"top_level_extra": {"kv_port": "1"}}, "top_level_extra may not set kv_port with the pool off"),
    ({"top_level_extra": {"kv_connector_module_path": "a.b"}}, "may not set kv_connector_module_path"),
])
def test_pool_off_refuses_settings_nothing_would_read(kwargs, needle):
    with pytest.raises(K.KvConfigError, match=needle.replace("{", r"\{").replace("}", r"\}")):
        K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_enabled=False, **kwargs)
    # the same settings are fine with the pool on (kv_port is then a top-level key nobody computes)
    K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_enabled=True, **kwargs)


def test_pool_enabled_must_be_a_bool():
    with pytest.raises(K.KvConfigError, match="pool_enabled must be true or false, got 'no'"):
        K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_enabled="no")


def test_notes_read_a_plain_mooncake_config():
    assert K.notes(K.build("prefill", 30000, MOONCAKE, 0, 2, 16, pool_enabled=False)) == []
    assert K.notes(K.build("prefill", 30000, MOONCAKE, 0, 2, 16))  # yuanrong: the patch note


def test_build_instances_gives_one_config_per_port_in_order_differing_only_in_the_port():
    configs = K.build_instances(["0", 1], "prefill", 30000, MOONCAKE, 2, 16, engine_id="0",
                                mooncake_extra={"use_ascend_direct": True}, mooncake_module_path=MODULE_PATH)
    assert [c["lookup_rpc_port"] for c in configs] == ["0", "1"]
    assert configs[0]["json"] == SEED_PREFILL_DP0  # the same text build() gives for one instance
    assert configs[1]["json"] == SEED_PREFILL_DP0.replace('"lookup_rpc_port":"0"', '"lookup_rpc_port":"1"')
    assert json.loads(configs[1]["json"]) == configs[1]["config"]


@pytest.mark.parametrize("ports, needle", [([], "non-empty list"), ("0", "non-empty list"),
                                           (["0", "1", "0"], "lookup_rpc_port 0 repeats on the host")])
def test_build_instances_refuses_no_ports_and_repeated_ports(ports, needle):
    with pytest.raises(K.KvConfigError, match=needle):
        K.build_instances(ports, "decode", 30100, MOONCAKE, 2, 16)


def test_build_instances_reports_config_errors_like_build():
    with pytest.raises(K.KvConfigError, match="kv_port"):
        K.build_instances(["0"], "decode", 0, MOONCAKE, 2, 16)


# --- the files of a host's instances (what the vllm role writes) ------------------------------------------------

# a3_self.instances of the seed's p1 (plugins/plugin_utils/_topology.py): keys the module does not read included
P1_INSTANCES = [{"local_rank": 0, "dp_rank": 1, "api_port": 6700, "devices": list(range(16)), "kv_ports": [30016, 30031],
                 "lookup_rpc_port": 1}]
SEED_OPTIONS = dict(engine_id="0", mooncake_extra={"use_ascend_direct": True}, mooncake_module_path=MODULE_PATH)


def test_instance_files_are_the_files_run_dp_template_reads_by_dp_rank():
    got = K.instance_files(P1_INSTANCES, "/var/lib/ascend-vllm-pd", "prefill", 30000, MOONCAKE, 2, 16, **SEED_OPTIONS)
    text = SEED_PREFILL_DP0.replace('"lookup_rpc_port":"0"', '"lookup_rpc_port":"1"')
    assert got["files"] == [{"dest": "/var/lib/ascend-vllm-pd/kv_transfer_config_dp1.json", "content": text + "\n",
                             "mode": "0644"}]
    assert got["by_rank"] == {"1": text}
    assert got["notes"] == K.notes(json.loads(text))


def test_instance_files_follow_the_instances_order_and_their_own_ranks_and_ports():
    instances = [{"dp_rank": 3, "lookup_rpc_port": "7"}, {"dp_rank": "2", "lookup_rpc_port": 9}]
    got = K.instance_files(instances, "/w/", "decode", 30100, MOONCAKE, 2, 16)
    # the rank names the file, the lookup port goes in the config: neither is taken from the list position
    assert [f["dest"] for f in got["files"]] == ["/w/kv_transfer_config_dp3.json", "/w/kv_transfer_config_dp2.json"]
    ports = [json.loads(f["content"])["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]
             ["lookup_rpc_port"] for f in got["files"]]
    assert ports == ["7", "9"]
    assert list(got["by_rank"]) == ["3", "2"]
    assert all(f["content"] == got["by_rank"][r] + "\n" for f, r in zip(got["files"], ("3", "2")))


def test_instance_files_with_the_pool_off_have_no_notes_and_no_lookup_port():
    got = K.instance_files([{"dp_rank": 0, "lookup_rpc_port": 0}], "/w", "decode", 30100, MOONCAKE, 2, 16,
                           pool_enabled=False)
    assert got["notes"] == [] and "lookup_rpc_port" not in got["files"][0]["content"]


@pytest.mark.parametrize("instances, work_dir, needle", [
    ([], "/w", "instances must be a non-empty list"),
    ("0", "/w", "instances must be a non-empty list"),
    ([{"lookup_rpc_port": 0}], "/w", "instance 0 has no dp_rank"),
    ([{"dp_rank": -1, "lookup_rpc_port": 0}], "/w", "instance 0 has no dp_rank"),
    ([{"dp_rank": True, "lookup_rpc_port": 0}], "/w", "instance 0 has no dp_rank"),
    (["x"], "/w", "instance 0 has no dp_rank"),
    ([{"dp_rank": 0, "lookup_rpc_port": 0}, {"dp_rank": 1}], "/w", r"instance 1 \(dp rank 1\) has no lookup_rpc_port"),
    ([{"dp_rank": 0, "lookup_rpc_port": 0}, {"dp_rank": "0", "lookup_rpc_port": 1}], "/w",
     "dp ranks 0 repeat: two instances would write the same kv_transfer_config_dp0.json"),
    ([{"dp_rank": 0, "lookup_rpc_port": 0}], "w", "work_dir must be an absolute path, got 'w'"),
    ([{"dp_rank": 0, "lookup_rpc_port": 0}], None, "work_dir must be an absolute path, got None"),
])
def test_instance_files_refuse_instances_that_cannot_name_their_file(instances, work_dir, needle):
    with pytest.raises(K.KvConfigError, match=needle):
        K.instance_files(instances, work_dir, "decode", 30100, MOONCAKE, 2, 16)


def test_instance_files_report_every_instance_problem_at_once():
    with pytest.raises(K.KvConfigError) as err:
        K.instance_files([{"dp_rank": "x", "lookup_rpc_port": 0}, {"dp_rank": 1, "lookup_rpc_port": ""}], "rel",
                         "decode", 30100, MOONCAKE, 2, 16)
    assert str(err.value) == ("work_dir must be an absolute path, got 'rel'; "
                              "instance 0 has no dp_rank (a non-negative integer): {'dp_rank': 'x', 'lookup_rpc_port': 0}; "
                              "instance 1 (dp rank 1) has no lookup_rpc_port")


def test_instance_files_refuse_what_build_and_build_instances_refuse():
    with pytest.raises(K.KvConfigError, match="lookup_rpc_port 5 repeats on the host: its instances would share"):
        K.instance_files([{"dp_rank": 0, "lookup_rpc_port": 5}, {"dp_rank": 1, "lookup_rpc_port": "5"}], "/w",
                         "decode", 30100, MOONCAKE, 2, 16)
    with pytest.raises(K.KvConfigError, match="mooncake.decode says dp 2 / tp 16"):
        K.instance_files([{"dp_rank": 0, "lookup_rpc_port": 0}], "/w", "decode", 30100, MOONCAKE, 4, 16)
