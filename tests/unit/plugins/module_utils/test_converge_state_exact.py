# -*- coding: utf-8 -*-
"""plugins/module_utils/_converge_state.py, pinned exactly: the digest's text (literal sha256 values), file and
tree hashes, which host values are inputs, the reasons a run is not whole, the units among the managed files, what
systemctl show and docker inspect give, the record and every reason the node differs from it."""
from __future__ import annotations

import os
from pathlib import PurePosixPath

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._converge_state import (
    controller_paths, differences, digest, file_sha, fingerprint, input_variables, make_record,
    parse_docker_inspect, parse_systemctl_show, tree_shas, unit_states, units_of, whole_run)

SHA_EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
SHA_A1 = "37b128c59f1f5097f73f82691cb519f1f568667faab5ced1b4ab979d36837eae"  # b"a: 1\n"
SHA_PRINT = "cc42155088fca5730758db72b2a5bca33112a941dfaa2d43098ec422ce4ea213"  # b"print(1)\n"
SHA_X10 = "fc11d6f28e59d3cc33c0b14ceb644bf0902ebd63d61218dffe9e7dac7c254542"  # b"x" * 10


@pytest.mark.parametrize("obj, want", [
    ({}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
    ({"b": [1, 2], "a": 1}, "8baa73198470c7bb4c3ce142a8fd651affc0310d878bb9bd159e37a573fb4874"),  # '{"a":1,"b":[1,2]}'
    ({"p": PurePosixPath("/x")}, "601c18794a98962f063ce07241b45549d5016289058b7ec3aeaeed4ccecaa9fe"),  # '{"p":"/x"}'
    ({"p": "/x"}, "601c18794a98962f063ce07241b45549d5016289058b7ec3aeaeed4ccecaa9fe"),
])
def test_digest_is_the_sha256_of_the_canonical_json(obj, want):
    assert digest(obj) == want


def test_digest_takes_text_that_is_no_valid_unicode():
    assert len(digest({"s": "\udcff"})) == 64


def test_file_sha_hashes_content_up_to_the_size_limit_then_says_size_and_mtime(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    os.utime(p, (1700000000.9, 1700000000.9))
    assert file_sha(str(p)) == SHA_X10
    assert file_sha(str(p), max_bytes=10) == SHA_X10
    assert file_sha(str(p), max_bytes=11) == SHA_X10
    assert file_sha(str(p), max_bytes=9) == "size:10:mtime:1700000000"
    assert file_sha(str(p), max_bytes=0) == "size:10:mtime:1700000000"
    (tmp_path / "e").write_bytes(b"")
    assert file_sha(str(tmp_path / "e")) == SHA_EMPTY
    assert file_sha(str(tmp_path / "e"), max_bytes=0) == SHA_EMPTY


def test_file_sha_of_a_big_file_reads_it_all(tmp_path):
    p = tmp_path / "big"
    p.write_bytes(b"\0" * (3 << 20) + b"end")
    assert file_sha(str(p)) == "224aecff2c0af98c6504162c8e11aff292cdb6d7ded73f3878af8dcfaafb08ef"


def test_file_sha_of_what_cannot_be_read_is_none(tmp_path):
    assert file_sha(str(tmp_path / "missing")) is None
    assert file_sha(str(tmp_path)) is None  # a directory
    assert file_sha(str(tmp_path / "missing"), max_bytes=1) is None


def test_tree_shas_walks_the_subdirectories_in_order_without_byte_code(tmp_path):
    for rel, data in (("roles/b/main.yml", b"a: 1\n"), ("roles/a/main.yml", b"a: 1\n"),
                      ("roles/a/__pycache__/m.cpython-311.pyc", b"\0"),
                      ("roles/a/__pycache__/notes.txt", b"x"), ("roles/c.pyo", b"\0"),
                      ("plugins/m.py", b"print(1)\n"), ("plugins/m.pyc", b"\0"), ("docs/x.md", b"x"),
                      ("playbooks/site.yml", b"")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    got = tree_shas(str(tmp_path))
    assert list(got.items()) == [("roles/a/main.yml", SHA_A1), ("roles/b/main.yml", SHA_A1),
                                 ("plugins/m.py", SHA_PRINT), ("playbooks/site.yml", SHA_EMPTY)]
    assert tree_shas(str(tmp_path), subdirs=("docs", "none")) == {
        "docs/x.md": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}
    assert tree_shas(str(tmp_path), subdirs=("plugins",), max_bytes=3) == {
        "plugins/m.py": "size:9:mtime:%d" % int(os.stat(tmp_path / "plugins" / "m.py").st_mtime)}


def test_tree_shas_skips_each_byte_code_file_and_keeps_the_rest_of_its_directory(tmp_path):
    (tmp_path / "plugins").mkdir()
    for i in range(5):
        (tmp_path / "plugins" / ("m%d.pyc" % i)).write_bytes(b"\0")
        (tmp_path / "plugins" / ("m%d.py" % i)).write_bytes(b"")
    assert tree_shas(str(tmp_path)) == {"plugins/m%d.py" % i: SHA_EMPTY for i in range(5)}


def test_every_run_fact_and_switch_is_no_input():
    host_vars = {name: 1 for name in ("a3_converge", "a3_fast_path_taken", "a3_managed_files", "a3_self",
                                      "a3_files_root", "a3_files_host", "a3_fast_path", "a3_converge_record")}
    host_vars.update({"a3_x": 1, "ansible_host": "h", "ansible_user": "u", "xa3_y": 1, "a3": 2})
    assert input_variables(host_vars) == {"a3_x": 1, "ansible_host": "h"}


@pytest.mark.parametrize("prefix", ["a3", "hugepages", "container", "patches", "etcd", "yuanrong", "vllm", "proxy",
                                    "monitoring", "gate", "preflight", "supervise", "rolling"])
def test_each_collection_prefix_makes_an_input(prefix):
    assert input_variables({prefix + "_knob": 1, prefix + "knob": 2, "x" + prefix + "_knob": 3}) == {
        prefix + "_knob": 1}


def test_controller_paths_are_the_non_empty_text_values_of_src_variables_sorted_once():
    values = {"z_src": "/b", "a_src_dir": "/a", "c_src": "/b", "d_src": ["/l"], "e_src": 5, "f_src": "",
              "g_srcx": "/g", "h_source": "/h"}
    assert controller_paths(values) == ["/a", "/b"]
    assert controller_paths({}) == []


@pytest.mark.parametrize("args, want", [
    ((["all"], [], None), []),
    (([], [], ""), []),
    ((None, None, None), []),
    ((["all", "vllm"], None, None), ["the run has --tags all,vllm"]),
    ((["vllm"], ["gate", "verify"], "p0,d0"), ["the run has --tags vllm", "the run has --skip-tags gate,verify",
                                               "the run has --limit p0,d0"]),
])
def test_whole_run_reasons(args, want):
    assert whole_run(*args) == want


def test_units_are_service_and_timer_files_of_each_systemd_directory():
    files = ["/etc/systemd/system/a.service", "/usr/lib/systemd/system/b.timer", "/lib/systemd/system/c.service",
             "/etc/systemd/system/d.socket", "/etc/systemd/system/a.service.d/e.service",
             "/etc/systemd/system/a.service", "/run/systemd/system/f.service", "/opt/g.service"]
    assert units_of(files) == ["a.service", "b.timer", "c.service"]


def test_parse_systemctl_show_keeps_values_with_equal_signs_and_skips_blocks_without_id():
    text = "\n\nId=a.service\nExecStart=/bin/x --opt=1\nActiveState=active\n  \nActiveState=failed\n\nId=\nX=1\n" \
           "\n\t\nId=b.timer\nUnitFileState=enabled\nnot a property\n\n"
    assert parse_systemctl_show(text) == {
        "a.service": {"Id": "a.service", "ExecStart": "/bin/x --opt=1", "ActiveState": "active"},
        "b.timer": {"Id": "b.timer", "UnitFileState": "enabled"}}
    assert parse_systemctl_show("") == {}


def test_unit_states_of_timers_services_and_empty_properties():
    shown = {"a.service": {"UnitFileState": "enabled", "ActiveState": ""},
             "t.timer": {"UnitFileState": "enabled", "ActiveState": "active"},
             "t.service": {"UnitFileState": "static", "ActiveState": "activating"},
             "u.service": {"UnitFileState": "", "ActiveState": "failed"},
             "timer.service": {"UnitFileState": "enabled", "ActiveState": "active"}}
    units = ["a.service", "t.timer", "t.service", "u.service", "timer.service", "gone.timer"]
    assert unit_states(units, shown) == {"a.service": "enabled/missing", "t.timer": "enabled/active",
                                         "t.service": "static", "u.service": "missing/failed",
                                         "timer.service": "enabled/active", "gone.timer": "missing/missing"}
    # a service whose timer is not managed keeps its run state
    assert unit_states(["t.service"], shown) == {"t.service": "static/activating"}
    assert unit_states(["gone.service", "gone.timer"], {}) == {"gone.service": "missing", "gone.timer": "missing/missing"}


@pytest.mark.parametrize("text, want", [
    ('[{"Name": "/a", "Id": "i", "Image": "m", "State": {"Status": "running"}}]',
     {"a": {"id": "i", "image": "m", "status": "running"}}),
    ('[{"Name": "b"}]', {"b": {"id": None, "image": None, "status": None}}),
    ('[{"Name": "/XX/y", "Id": "X"}]', {"XX/y": {"id": "X", "image": None, "status": None}}),
    ('[{"Name": "//c", "State": null}]', {"c": {"id": None, "image": None, "status": None}}),
    ('[{"Name": "/"}, {"Id": "x"}, {"Name": ""}]', {}),
    ('{"Name": "/a"}', {}),
    ("null", {}),
    ("[]", {}),
    (None, {}),
    ("", {}),
    ("[", {}),
])
def test_parse_docker_inspect(text, want):
    assert parse_docker_inspect(text) == want


def test_fingerprint_and_record_are_whole_and_copies():
    files = {"/f": "s"}
    fp = fingerprint(files, {"u": "enabled/active"}, {"c": None}, {"i": "sha256:1"})
    assert fp == {"files": {"/f": "s"}, "units": {"u": "enabled/active"}, "containers": {"c": None},
                  "images": {"i": "sha256:1"}}
    fp["files"]["/g"] = "t"
    assert files == {"/f": "s"}
    assert make_record("d" * 64, fp) == {"version": 1, "digest": "d" * 64, "fingerprint": fp}


def test_the_inputs_reason_shows_twelve_characters_of_each_digest():
    now, then = "0123456789ab" + "c" * 52, "fedcba987654" + "3" * 52
    assert differences(make_record(then, {}), now, {}) == [
        "the inputs changed since the last converge (collection files, inventory values or controller files): "
        "digest 0123456789ab, recorded fedcba987654"]
    assert differences({"version": 1}, now, {}) == [
        "the inputs changed since the last converge (collection files, inventory values or controller files): "
        "digest 0123456789ab, recorded None"]


@pytest.mark.parametrize("record, want", [
    (None, ["no record of a converge on this node"]),
    ({}, ["no record of a converge on this node"]),
    ({"digest": "d"}, ["the record has version None, this collection writes 1"]),
    ({"version": 2, "digest": "d"}, ["the record has version 2, this collection writes 1"]),
    ({"version": 1, "digest": "d"}, []),
    ({"version": 1, "digest": "d", "fingerprint": None}, []),
])
def test_records_that_cannot_be_compared(record, want):
    assert differences(record, "d", {}) == want


def test_every_kind_of_difference_in_order_with_short_values():
    a64, b64 = "a" * 64, "b" * 64
    recorded = fingerprint({"/b": a64, "/a": "sha256:" + b64, "/c": "a" * 63},
                           {"u.service": "enabled/active"},
                           {"c": {"id": b64, "image": "sha256:" + a64, "status": "running"}},
                           {"img:1": "sha256:" + a64, "img:2": "x"})
    now = {"files": {"/b": a64, "/a": None, "/c": "a" * 65, "/d": "A" * 64},
           "units": {"u.service": "enabled/failed"},
           "containers": {"c": None},
           "images": {"img:1": "sha256:" + a64, "img:2": 7}}
    assert differences(make_record("d", recorded), "d", now) == [
        "file /a: missing, recorded bbbbbbbbbbbb",
        "file /c: %s, recorded %s" % ("a" * 65, "a" * 63),
        "file /d: %s, recorded missing" % ("A" * 64),
        "unit u.service: enabled/failed, recorded enabled/active",
        "container c: missing, recorded id=bbbbbbbbbbbb,image=aaaaaaaaaaaa,status=running",
        "image img:2: 7, recorded x",
    ]


def test_a_kind_missing_on_either_side_reads_as_empty():
    recorded = make_record("d", {"files": {"/f": "s"}})
    assert differences(recorded, "d", {"units": {"u": "x"}}) == ["file /f: missing, recorded s",
                                                                 "unit u: x, recorded missing"]
    assert differences(recorded, "d", {"files": None, "units": None}) == ["file /f: missing, recorded s"]
    assert differences(make_record("d", {"images": None}), "d", {"images": {"i": None}}) == []
