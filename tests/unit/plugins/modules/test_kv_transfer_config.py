# -*- coding: utf-8 -*-
"""The module ascend.vllm_pd.kv_transfer_config: main() run with its arguments as Ansible passes them, the result
it prints, and its documentation against its argument spec."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.vllm_pd.plugins.modules import kv_transfer_config

ROOT = Path(__file__).resolve().parents[4]
GOLDEN_WORK = ROOT / "tests" / "golden" / "a3" / "%s" / "var" / "lib" / "ascend-vllm-pd"
WORK_DIR = "/var/lib/ascend-vllm-pd"
MOONCAKE = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}
# What roles/vllm/tasks/kv_config.yml passes on the seed's nodes (the role defaults; the topology of inventories/a3).
SEED = {"kv_port": 30000, "mooncake": MOONCAKE, "dp_size": 2, "tp_size": 16, "pool_backend": "yuanrong",
        "mooncake_extra": {"use_ascend_direct": True},
        "mooncake_module_path": "vllm_ascend.distributed.mooncake_connector", "top_level_extra": {},
        "pool_enabled": True}


@pytest.fixture
def run(run_main):
    """``run({...}, check_mode=False)`` -> (the JSON main() printed, its exit status)."""
    return functools.partial(run_main, kv_transfer_config.main)


def host_args(side, instances, **extra):
    args = dict(SEED, side=side, instances=instances, work_dir=WORK_DIR)
    args["kv_port"] = 30000 if side == "prefill" else 30100
    if side == "prefill":
        args["engine_id"] = "0"
    args.update(extra)
    return args


@pytest.mark.parametrize("host, side, rank", [("p0", "prefill", 0), ("p1", "prefill", 1), ("d0", "decode", 0),
                                              ("d1", "decode", 1)])
def test_the_instances_files_are_the_golden_render(run, host, side, rank):
    """The seed's a3_self.instances (one instance per node; lookup_rpc_port 0 on prefill, the dp rank on decode), keys
    the module does not read included: the result is the file the golden render holds."""
    lookup = rank if side == "decode" else 0
    instance = {"local_rank": 0, "dp_rank": rank, "api_port": 6700, "devices": list(range(16)),
                "kv_ports": [30000 + rank * 16, 30015 + rank * 16], "lookup_rpc_port": lookup}
    result, status = run(host_args(side, [instance]))
    name = "kv_transfer_config_dp%d.json" % rank
    golden = (Path(str(GOLDEN_WORK) % host) / name).read_text()
    assert status == 0 and result["changed"] is False
    assert result["files"] == [{"dest": "%s/%s" % (WORK_DIR, name), "content": golden, "mode": "0644"}]
    assert result["by_rank"] == {str(rank): golden.rstrip("\n")}
    assert "config" not in result and "json" not in result and "configs" not in result


def test_several_instances_of_a_host_in_one_call_in_check_mode_too(run):
    instances = [{"dp_rank": 2, "lookup_rpc_port": 0}, {"dp_rank": 3, "lookup_rpc_port": 1}]
    result, status = run(host_args("decode", instances, mooncake={"prefill": {"dp_size": 2, "tp_size": 16},
                                                                  "decode": {"dp_size": 4, "tp_size": 16}},
                                   dp_size=4))
    assert status == 0
    assert [f["dest"] for f in result["files"]] == [WORK_DIR + "/kv_transfer_config_dp2.json",
                                                    WORK_DIR + "/kv_transfer_config_dp3.json"]
    assert [json.loads(result["by_rank"][r])["kv_connector_extra_config"]["connectors"][1]
            ["kv_connector_extra_config"]["lookup_rpc_port"] for r in ("2", "3")] == ["0", "1"]
    # yuanrong is not a pool backend of vllm-ascend v0.18.0: the note says the patch is needed
    assert result["notes"] and "yuanrong" in result["notes"][0]
    checked, status = run(host_args("decode", instances, mooncake={"prefill": {"dp_size": 2, "tp_size": 16},
                                                                   "decode": {"dp_size": 4, "tp_size": 16}},
                                    dp_size=4), check_mode=True)
    assert status == 0 and checked["files"] == result["files"]  # pure computation: the same in check mode


def test_one_instance_by_its_lookup_rpc_port(run):
    args = dict(SEED, side="decode", kv_port=30100, lookup_rpc_port="1")
    result, status = run(args)
    golden = (Path(str(GOLDEN_WORK) % "d1") / "kv_transfer_config_dp1.json").read_text()
    assert status == 0 and result["json"] + "\n" == golden and result["config"] == json.loads(golden)
    assert "files" not in result and "by_rank" not in result


def test_a_config_error_fails_with_every_problem_and_the_fix(run):
    result, status = run(host_args("decode", [{"dp_rank": 0, "lookup_rpc_port": 0}, {"dp_rank": 0, "lookup_rpc_port": 1}],
                                   work_dir="relative"))
    assert status == 1 and result["failed"] is True
    assert result["msg"] == ("invalid kv-transfer-config for the decode side: work_dir must be an absolute path, got "
                             "'relative'; dp ranks 0 repeat: two instances would write the same "
                             "kv_transfer_config_dp0.json; fix the vllm_* variables in the inventory")
    result, status = run(host_args("prefill", [{"dp_rank": 0, "lookup_rpc_port": 0}], dp_size=4))
    assert status == 1 and "mooncake.prefill says dp 2 / tp 16 but this prefill instance runs dp 4" in result["msg"]
    result, status = run(host_args("decode", []))  # a host without instances: nothing to write is a mistake
    assert status == 1 and "instances must be a non-empty list (one per engine instance), got []" in result["msg"]


@pytest.mark.parametrize("drop, add, needle", [
    (("work_dir",), {}, "parameters are required together: instances, work_dir"),
    (("instances", "work_dir"), {}, "one of the following is required: lookup_rpc_port, instances"),
    ((), {"lookup_rpc_port": "0"}, "parameters are mutually exclusive: lookup_rpc_port|instances"),
    ((), {"side": "both"}, "value of side must be one of: prefill, decode"),
])
def test_the_argument_spec_refuses_what_has_no_single_meaning(run, drop, add, needle):
    args = dict(host_args("decode", [{"dp_rank": 0, "lookup_rpc_port": 0}]), **add)
    for key in drop:
        args.pop(key)
    result, status = run(args)
    assert status == 1 and needle in result["msg"], result["msg"]


def test_documentation_matches_the_argument_spec(module_spec, docs_match_spec):
    docs, spec, kwargs = module_spec("kv_transfer_config")
    docs_match_spec(docs, spec)
    assert kwargs["mutually_exclusive"] == [("lookup_rpc_port", "instances")]
    assert kwargs["required_together"] == [("instances", "work_dir")]
    assert set(docs["RETURN"]) == {"config", "json", "files", "by_rank", "notes"}
    assert set(docs["RETURN"]["files"]["contains"]) == {"dest", "content", "mode"}


def test_the_examples_use_only_the_modules_options(module_spec):
    docs, spec, _kwargs = module_spec("kv_transfer_config")
    tasks = [t for t in docs["EXAMPLES"] if "ascend.vllm_pd.kv_transfer_config" in t]
    assert len(tasks) == 2
    for task in tasks:
        assert set(task["ascend.vllm_pd.kv_transfer_config"]) <= set(spec), task["name"]


def test_the_role_passes_only_the_modules_options(module_spec):
    """roles/vllm/tasks/kv_config.yml: the one call of the role."""
    _docs, spec, _kwargs = module_spec("kv_transfer_config")
    (task,) = yaml.safe_load((ROOT / "roles" / "vllm" / "tasks" / "kv_config.yml").read_text())
    args = task["ascend.vllm_pd.kv_transfer_config"]
    assert set(args) <= set(spec) and {"instances", "work_dir"} <= set(args) and "lookup_rpc_port" not in args
