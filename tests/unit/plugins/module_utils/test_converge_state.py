# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/module_utils/_converge_state.py (the record of the last converge)."""

from __future__ import annotations

import os

from ansible_collections.ascend.vllm_pd.plugins.module_utils._converge_state import (
    controller_paths, differences, digest, file_sha, fingerprint, input_variables, make_record,
    parse_docker_inspect, parse_systemctl_show, tree_shas, unit_states, units_of, whole_run)

SHOW = """Id=ascend-vllm.service
ActiveState=active
UnitFileState=enabled

Id=ascend-vllm-canary.service
ActiveState=activating
UnitFileState=static

Id=ascend-vllm-canary.timer
ActiveState=active
UnitFileState=enabled

Id=ascend-etcd.service
ActiveState=inactive
UnitFileState=
"""

INSPECT = """[
 {"Name": "/yr_glm5", "Id": "c1", "Image": "sha256:i1", "State": {"Status": "running", "Pid": 42}},
 {"Name": "/yr_glm5_proxy", "Id": "c2", "Image": "sha256:i1", "State": {"Status": "exited"}}
]"""


FILES = {"/etc/a.conf": "s1", "/opt/b.sh": "s2"}
UNITS = {"ascend-vllm.service": "enabled/active"}
CONTAINERS = {"yr_glm5": {"id": "c1", "image": "i1", "status": "running"}}
IMAGES = {"repo/img:tag": "i1"}


def node(files=None, units=None, containers=None, images=None):
    return fingerprint(FILES if files is None else files, UNITS if units is None else units,
                       CONTAINERS if containers is None else containers, IMAGES if images is None else images)


def test_digest_is_canonical_and_sees_every_value():
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1, "b": [1, 2]}) != digest({"a": 1, "b": [2, 1]})
    assert digest({"a": "1"}) != digest({"a": 1})
    assert len(digest({})) == 64


def test_a_node_that_matches_its_record_has_no_difference():
    assert differences(make_record("d1", node()), "d1", node()) == []


def test_no_record_or_another_version_is_a_full_run():
    assert differences(None, "d1", {}) == ["no record of a converge on this node"]
    old = dict(make_record("d1", node()), version=0)
    assert differences(old, "d1", node()) == ["the record has version 0, this collection writes 1"]


def test_every_kind_of_drift_is_named():
    record = make_record("d1", node())
    drifted = node(files={"/etc/a.conf": "s9", "/opt/b.sh": None, "/etc/new.conf": "s3"},
                   units={"ascend-vllm.service": "enabled/failed"},
                   containers={"yr_glm5": {"id": "c9", "image": "i1", "status": "running"}},
                   images={"repo/img:tag": "i2"})
    reasons = differences(record, "d2", drifted)
    assert reasons[0].startswith("the inputs changed since the last converge")
    assert "file /etc/a.conf: s9, recorded s1" in reasons
    assert "file /opt/b.sh: missing, recorded s2" in reasons
    assert "file /etc/new.conf: s3, recorded missing" in reasons
    assert "unit ascend-vllm.service: enabled/failed, recorded enabled/active" in reasons
    assert "container yr_glm5: id=c9,image=i1,status=running, recorded id=c1,image=i1,status=running" in reasons
    assert "image repo/img:tag: i2, recorded i1" in reasons
    assert len(reasons) == 7


def test_only_the_inputs_changed():
    assert differences(make_record("d1", node()), "d2", node()) == [
        "the inputs changed since the last converge (collection files, inventory values or controller files): "
        "digest d2, recorded d1"]


def test_long_hashes_are_shortened_in_the_reasons():
    a, b = "a" * 64, "sha256:" + "b" * 64
    reasons = differences(make_record("d", node(files={"/f": a})), "d", node(files={"/f": b}))
    assert reasons == ["file /f: bbbbbbbbbbbb, recorded aaaaaaaaaaaa"]


def test_units_are_the_managed_unit_files():
    files = ["/etc/systemd/system/ascend-vllm.service", "/etc/systemd/system/ascend-vllm-canary.timer",
             "/etc/systemd/system/ascend-vllm.service.d/override.conf", "/var/lib/x/ascend.service",
             "/etc/prometheus/prometheus.yml"]
    assert units_of(files) == ["ascend-vllm-canary.timer", "ascend-vllm.service"]


def test_unit_states_ignore_the_run_state_of_a_timer_driven_service():
    shown = parse_systemctl_show(SHOW)
    assert shown["ascend-vllm.service"]["ActiveState"] == "active"
    units = ["ascend-vllm.service", "ascend-vllm-canary.service", "ascend-vllm-canary.timer", "ascend-etcd.service",
             "ascend-gone.service"]
    assert unit_states(units, shown) == {
        "ascend-vllm.service": "enabled/active",
        "ascend-vllm-canary.service": "static",          # activating now and then: not part of the record
        "ascend-vllm-canary.timer": "enabled/active",
        "ascend-etcd.service": "missing/inactive",
        "ascend-gone.service": "missing/missing",
    }


def test_docker_inspect_keeps_id_image_and_status():
    assert parse_docker_inspect(INSPECT) == {
        "yr_glm5": {"id": "c1", "image": "sha256:i1", "status": "running"},
        "yr_glm5_proxy": {"id": "c2", "image": "sha256:i1", "status": "exited"}}
    assert parse_docker_inspect("") == {}
    assert parse_docker_inspect("Error: No such object") == {}


def test_inputs_are_the_collection_variables_without_the_run_facts_and_switches():
    host_vars = {"vllm_model_path": "/m", "a3_host_work_dir": "/w", "ansible_host": "127.0.0.1",
                 "ansible_connection": "docker", "inventory_dir": "/inv", "a3_self": {"x": 1},
                 "a3_converge": {"in_sync": True}, "a3_fast_path": False, "a3_managed_files": ["/f"],
                 "a3": {"hosts": {}}, "my_var": 1, "gate_pool_check": True}
    assert input_variables(host_vars) == {"vllm_model_path": "/m", "a3_host_work_dir": "/w",
                                          "ansible_host": "127.0.0.1", "gate_pool_check": True}


def test_controller_paths_come_from_src_variables():
    values = {"patches_src_dir": "/c/patches", "etcd_archive_src": "/c/etcd.tgz", "vllm_launcher_src": "",
              "vllm_model_path": "/m", "yuanrong_wheel_src": None}
    assert controller_paths(values) == ["/c/etcd.tgz", "/c/patches"]


def test_a_run_with_tags_skip_tags_or_limit_is_not_whole():
    assert whole_run(["all"], [], None) == []
    assert whole_run(None, None, None) == []
    assert whole_run(["vllm", "verify"], [], None) == ["the run has --tags vllm,verify"]
    assert whole_run(["all"], ["gate"], "p0") == ["the run has --skip-tags gate", "the run has --limit p0"]


def test_file_shas_and_trees(tmp_path):
    (tmp_path / "roles" / "r" / "__pycache__").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 1\n")
    (tmp_path / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "m.py").write_text("print(1)\n")
    (tmp_path / "plugins" / "m.pyc").write_bytes(b"\0")
    before = tree_shas(str(tmp_path))
    assert sorted(before) == [os.path.join("plugins", "m.py"), os.path.join("roles", "r", "main.yml")]
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 2\n")
    assert tree_shas(str(tmp_path)) != before
    assert file_sha(str(tmp_path / "none")) is None
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 100)
    assert file_sha(str(big), max_bytes=10).startswith("size:100:mtime:")
    assert file_sha(str(big)) == file_sha(str(big), max_bytes=1000)
