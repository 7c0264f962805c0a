# -*- coding: utf-8 -*-
"""The helpers the validation rules share, called directly: the serve flags as the role combines them and the values
vLLM 0.18 refuses (value_problem), the engines' environment as roles/vllm merges it (merged_env), the Linux interface
name check, and the values that must agree on every host (placement), each with its full message or result."""
from __future__ import annotations

import datetime

import pytest
from test_validate_rules import SEED_WARNINGS, V, _on, seed

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import base as B
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import common, vllm_env, vllm_serve

POSITIVE = "set a positive integer"
MODEL_LEN = "set a positive token count (e.g. 202752, 128k), or -1/auto"
FRACTION = "set the fraction of NPU memory vLLM may use, above 0 and at most 1 (e.g. 0.9)"
TOKENS = "num_speculative_tokens must be a positive integer: set e.g. {num_speculative_tokens: 3, method: deepseek_mtp}"


def _bare(flag):
    return ("vllm serve takes --%s without a value (a value after it is an argument vLLM does not know): set true "
            "(the bare flag) or false (left out), unquoted" % flag)


def _json(flag):
    return "vLLM reads --%s as JSON: set a mapping, e.g. %s: {key: value}" % (flag, flag)


@pytest.mark.parametrize("flag,value,problem", [
    ("max-model-len", 202752, None), ("max-model-len", "128k", None), ("max-model-len", "25.6K", None),
    ("max-model-len", "1M", None), ("max-model-len", "2g", None), ("max-model-len", -1, None),
    ("max-model-len", "auto", None), ("max-model-len", 1, None),
    ("max-model-len", 0, MODEL_LEN), ("max-model-len", "0", MODEL_LEN), ("max-model-len", -2, MODEL_LEN),
    ("max-model-len", True, MODEL_LEN), ("max-model-len", "1.5.5", MODEL_LEN), ("max-model-len", "12t", MODEL_LEN),
    ("max-model-len", "auto-fit", MODEL_LEN), ("max-model-len", " 5", MODEL_LEN),
    ("max-num-seqs", 1, None), ("max-num-seqs", "8", None), ("max-num-seqs", 0, POSITIVE),
    ("max-num-seqs", "x", POSITIVE), ("max-num-seqs", 2.0, POSITIVE), ("max-num-batched-tokens", 0, POSITIVE),
    ("block-size", -1, POSITIVE), ("num-gpu-blocks-override", True, POSITIVE),
    ("seed", 0, None), ("seed", -1, "set an integer >= 0"), ("seed", "s", "set an integer >= 0"),
    ("gpu-memory-utilization", 1, None), ("gpu-memory-utilization", 0.001, None),
    ("gpu-memory-utilization", "0.5", None), ("gpu-memory-utilization", 0, FRACTION),
    ("gpu-memory-utilization", 1.01, FRACTION), ("gpu-memory-utilization", True, FRACTION),
    ("gpu-memory-utilization", "most", FRACTION),
    ("enforce-eager", True, None), ("enforce-eager", 1, _bare("enforce-eager")),
    ("skip-tokenizer-init", "true", _bare("skip-tokenizer-init")), ("enable-eplb", "", _bare("enable-eplb")),
    ("additional-config", {}, None), ("additional-config", '{"a": 1}', None),
    ("additional-config", "[1]", _json("additional-config")), ("additional-config", 3, _json("additional-config")),
    ("compilation-config", 3, None), ("compilation-config", "3", None),
    ("compilation-config", "O3", _json("compilation-config")), ("kv-events-config", 3, _json("kv-events-config")),
    ("hf-overrides", {"a": 1}, None), ("hf-overrides", "x", _json("hf-overrides")),
    ("generation-config", "auto", None), ("generation-config", 3, None),
    ("speculative-config", {}, None), ("speculative-config", {"num_speculative_tokens": "2"}, None),
    ("speculative-config", '{"num_speculative_tokens": 1}', None),
    ("speculative-config", {"num_speculative_tokens": 0}, TOKENS),
    ("speculative-config", {"num_speculative_tokens": "x"}, TOKENS),
    ("speculative-config", '{"num_speculative_tokens": -1}', TOKENS),
    ("speculative-config", 3, _json("speculative-config")),
    ("tool-call-parser", 3, None), ("max-log-len", "x", None), ("config", "x", None),
])
def test_the_values_vllm_refuses(flag, value, problem):
    assert vllm_serve.value_problem(flag, value) == problem


def _host(**values):
    return B.Host("p0", values, [], [], None)


def test_merged_flags_the_side_over_the_common_layer():
    h = _host(vllm_serve_args_common={"max_num_seqs": 4, "seed": 1, "--bad": 1},
              vllm_prefill_serve_args={"max-num-seqs": 8, "data_parallel_rank": 0, "enforce_eager": True},
              vllm_decode_serve_args={"seed": 2})
    assert vllm_serve.merged_flags(h, "prefill") == {
        "max-num-seqs": (8, "vllm_prefill_serve_args"), "seed": (1, "vllm_serve_args_common"),
        "enforce-eager": (True, "vllm_prefill_serve_args")}
    assert vllm_serve.merged_flags(h, "decode") == {
        "max-num-seqs": (4, "vllm_serve_args_common"), "seed": (2, "vllm_decode_serve_args")}
    assert vllm_serve.merged_flags(h, None) == {"max-num-seqs": (4, "vllm_serve_args_common"),
                                                "seed": (1, "vllm_serve_args_common")}
    assert h.errors == []
    vllm_serve.merged_flags(h, "prefill", report=True)
    assert h.errors == [
        "p0: vllm_serve_args_common is {'--bad': 1}: the role adds the dashes itself (this becomes ----bad): set the "
        "flag as bad",
        "p0: vllm_prefill_serve_args is {'data_parallel_rank': 0}: run_dp_template.sh sets --data_parallel_rank itself "
        "(from launch_online_dp.py and the topology), a second one conflicts: remove it and set the inventory "
        "variable instead (vllm_api_port, vllm_dp_*, vllm_<side>_tp_size, a3_listen_address, vllm_model_path, "
        "vllm_<side>_kv_port)"]


def test_merged_flags_skips_a_layer_that_is_no_mapping():
    h = _host(vllm_serve_args_common="x", vllm_decode_serve_args={"seed": 2})
    assert vllm_serve.merged_flags(h, "decode") == {"seed": (2, "vllm_decode_serve_args")}


@pytest.mark.parametrize("flag", ["host", "port", "tensor-parallel-size", "tensor_parallel_size", "kv-transfer-config",
                                  "kv_transfer_config", "model", "data-parallel-size-local", "data_parallel_address"])
def test_the_flags_the_launcher_writes(flag):
    assert vllm_serve._flag_name_problem(flag).startswith("run_dp_template.sh sets --%s itself" % flag)


@pytest.mark.parametrize("flag", ["model-impl", "hosts", "data-parallel", "served-model-name", "max_model_len"])
def test_flags_the_launcher_leaves_alone(flag):
    assert vllm_serve._flag_name_problem(flag) is None


def test_a_serve_flag_written_with_underscores_is_judged_as_its_dashed_name():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["vllm_serve_args_common"] = dict(hv["vllm_serve_args_common"], block_size=0)
    assert V.validate(inv)[0] == ["p0, p1, d0, d1: vllm_serve_args_common is {'block-size': 0}: set a positive integer"]


def test_null_false_and_templated_serve_values_are_left_out():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["vllm_decode_serve_args"] = dict(hv["vllm_decode_serve_args"], **{
            "block-size": None, "seed": False, "max-num-seqs": "{{ n }}", "enforce-eager": False})
    assert V.validate(inv)[0] == []


# --- the engines' environment ------------------------------------------------------------------------------------


def test_merged_env_common_then_side_then_extra():
    hv = {"vllm_env_common": {"A": "1", "B": "c", "C": "c"}, "vllm_prefill_env": {"B": "p", 5: "x"},
          "vllm_decode_env": {"C": "d"}, "vllm_env_extra": {"A": "e"}}
    assert vllm_env.merged_env(hv, "prefill") == {"A": ("e", "vllm_env_extra"), "B": ("p", "vllm_prefill_env"),
                                                  "C": ("c", "vllm_env_common"), "5": ("x", "vllm_prefill_env")}
    assert vllm_env.merged_env(hv, "decode") == {"A": ("e", "vllm_env_extra"), "B": ("c", "vllm_env_common"),
                                                 "C": ("d", "vllm_decode_env")}
    assert vllm_env.merged_env(hv, None) == {"A": ("e", "vllm_env_extra"), "B": ("c", "vllm_env_common"),
                                             "C": ("c", "vllm_env_common")}
    assert vllm_env.merged_env({"vllm_env_common": "{{ x }}", "vllm_env_extra": ["A"]}, "prefill") == {}


def test_a_host_in_both_groups_has_no_side_environment():
    inv = {"groups": {"prefill": ["b"], "decode": ["b"]}, "hosts": {"b": {"vllm_env_common": {"Z": "1"}}}}
    ctx = B.Context(inv, False, {})
    assert vllm_env._side_env(ctx.host("b"), ctx) is None


def test_an_unset_list_that_is_no_list_unsets_nothing():
    assert vllm_env._unset(_host(vllm_env_unset="PYTHONHASHSEED")) == set()
    assert vllm_env._unset(_host(vllm_env_unset=["A", "A", "B"])) == {"A", "B"}


# --- interface names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nic,problem", [
    ("a" * 15, ""), ("a" * 16, "is 16 characters long, Linux allows at most 15"),
    ("é" * 8, "is 8 characters long, Linux allows at most 15"), ("é" * 7, ""),
    (".", "is not a name Linux allows"), ("..", "is not a name Linux allows"), ("...", ""),
    ("a\tb", "contains white space, '/', ':' or a quote, which no Linux interface name has"),
    ("a`b", "contains white space, '/', ':' or a quote, which no Linux interface name has"),
    ('a"b', "contains white space, '/', ':' or a quote, which no Linux interface name has"),
    ("eth0.100", ""), ("ib0_1-x", ""),
])
def test_nic_problem(nic, problem):
    assert common.nic_problem(nic) == problem


# --- values every host shares ----------------------------------------------------------------------------------------


def test_a_shared_warning_value_set_on_one_host():
    errors, warnings = V.validate(_on("d1", container_image_tag="v0.18.0rc1-a3"))
    assert errors == []
    assert [w for w in warnings if w not in SEED_WARNINGS] == [
        "p0, p1, d0, d1: container_image_tag differs between the hosts (p0='v0.18.0-a3', p1='v0.18.0-a3', "
        "d0='v0.18.0-a3', d1='v0.18.0rc1-a3'): prefill and decode must run the same vllm-ascend (the KV transfer and "
        "the patch set); set one value for every host (group_vars/all)"]


def test_a_templated_shared_value_is_not_compared():
    inv = seed()
    inv["hosts"]["d1"]["vllm_served_model_name"] = "{{ name }}"
    assert V.validate(inv)[0] == []


def test_a_shared_value_yaml_read_as_a_date_is_compared_as_text():
    errors, _unused = V.validate(_on("d1", etcd_tls=datetime.date(2024, 1, 1)))
    assert errors == [
        "d1: etcd_tls is datetime.date(2024, 1, 1): set true or false (unquoted YAML booleans)",
        "p0, p1, d0, d1: etcd_tls differs between the hosts (p0=False, p1=False, d0=False, "
        "d1=datetime.date(2024, 1, 1)): every worker and the proxy talk to the one etcd, which either takes TLS with "
        "client certificates or plain HTTP; set one value for every host (group_vars/all)"]


@pytest.mark.parametrize("values", [
    dict(container_extra_volumes=["/srv:/srv:ro", "named_vol:/vol", "/x:/y/", "/a:/"]),
    dict(vllm_model_path="/data"), dict(vllm_model_path="/data/m/"),
    dict(container_extra_volumes=["/m:/models/"], vllm_model_path="/models/x"),
    dict(container_volumes=[], container_extra_volumes=[], vllm_model_path="/nowhere/m"),
    dict(container_name="ab", proxy_container_name="a.b-c_d"),
    dict(preflight_port_owner_cmdlines=["a.*b", r"\d+"], preflight_port_owner_names=[], gate_expect_pattern="^OK$"),
    dict(preflight_page_size=65536, preflight_min_hdk="", preflight_min_cann="25", preflight_memory_reserve="0"),
    dict(preflight_page_size="4096", preflight_fabric_min_hdk=None, preflight_fabric_min_cann="8.5.0"),
    dict(supervise_backoff_base=5, supervise_backoff_max=5), dict(yuanrong_node_timeout_s=2),
    dict(yuanrong_node_timeout_s=20, yuanrong_node_dead_timeout_s=21),
    dict(hugepages_target="1G", hugepages_page_size="1G"),
    dict(a3_listen_address="::", vllm_bind_host="0.0.0.0"),
])
def test_values_the_rules_take(values):
    errors, warnings = V.validate(seed(**values))
    assert errors == [] and [w for w in warnings if w not in SEED_WARNINGS] == []


def test_two_mounts_at_the_containers_root():
    assert V.validate(seed(container_extra_volumes=["/a:/", "/b:/:ro"]))[0] == [
        "p0, p1, d0, d1: container_volumes is ['/a:/', '/b:/:ro']: docker refuses two mounts at one container path (/): "
        "set only one of them"]


def test_templated_prefill_mappings_are_not_judged():
    """The field rules read speculative-config and additional-config only once they are mappings, not templates."""
    inv = seed()
    for name, hv in inv["hosts"].items():
        if name.startswith("p"):
            hv["vllm_prefill_serve_args"] = dict(hv["vllm_prefill_serve_args"], **{
                "speculative-config": "{{ spec }}", "additional-config": "{{ extra }}"})
    errors, warnings = V.validate(inv)
    assert errors == [] and [w for w in warnings if w not in SEED_WARNINGS] == []
    assert not [w for w in warnings if w.startswith("p0, p1: vllm_serve_args_common")]


def test_mounts_that_are_no_list_or_no_text_are_left_to_the_declaration():
    assert V.validate(seed(container_extra_volumes=[5, "/data"]))[0] == [
        "p0, p1, d0, d1: container_extra_volumes is [5, '/data']: set a list of non-empty strings (quote numbers), "
        "e.g. []",
        "p0, p1, d0, d1: container_extra_volumes is '/data': a mount is host_path:container_path[:options] with "
        "absolute paths: set e.g. /data:/data or /data:/data:ro"]
    assert V.validate(seed(container_extra_volumes="/a"))[0] == [
        "p0, p1, d0, d1: container_extra_volumes is '/a': set a list of non-empty strings (quote numbers), e.g. []"]
