# -*- coding: utf-8 -*-
"""plugins/module_utils/_files.py and the module ascend.vllm_pd.files: a role's files in one call, only what
differs is written; check mode writes nothing; --diff shows before/after."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import (
    apply, command_validator, diff_entry, missing_dirs, needs_daemon_reload, parse_mode, plan, unit_actions)


def f(path, content=b"x\n", mode=0o644):
    return {"path": path, "content": content, "mode": mode}


def state(content=b"x\n", mode=0o100644, kind="file"):
    return {"content": content, "mode": mode, "kind": kind}


@pytest.mark.parametrize("given, want", [("0644", 0o644), ("755", 0o755), (0o600, 0o600), ("0750", 0o750)])
def test_parse_mode_reads_octal(given, want):
    assert parse_mode(given) == want


@pytest.mark.parametrize("given", ["rw-r--r--", "0849", "", True, "17777"])
def test_parse_mode_refuses_what_is_not_an_octal_permission(given):
    with pytest.raises(ValueError):
        parse_mode(given)


def test_plan_leaves_out_files_in_the_desired_state():
    assert plan([f("/a"), f("/b", b"y\n")], {"/a": state(), "/b": state(b"y\n")}) == []


def test_plan_names_create_update_and_mode_only_changes():
    files = [f("/new"), f("/content", b"new\n"), f("/mode", mode=0o755)]
    got = plan(files, {"/new": None, "/content": state(b"old\n"), "/mode": state()})
    assert [(c["path"], c["action"], c["before"]) for c in got] == [
        ("/new", "create", None), ("/content", "update", b"old\n"), ("/mode", "mode", b"x\n")]


def test_plan_refuses_to_replace_a_directory():
    with pytest.raises(ValueError, match="/d exists and is not a regular file"):
        plan([f("/d")], {"/d": state(None, 0o40755, "dir")})


def test_missing_dirs_parents_first_and_once():
    have = {"/", "/etc"}
    assert missing_dirs(["/etc/a/b", "/etc/a/b", "/etc/a/c/", "/etc"], lambda d: d in have) == [
        "/etc/a", "/etc/a/b", "/etc/a/c"]


def test_diff_entry_hides_large_or_binary_contents_and_shows_a_mode_change():
    assert diff_entry("/f", None, b"a\n")["before_header"] == "/f (absent)"
    assert diff_entry("/f", b"\0\1", b"a\n")["before"] == "(2 bytes, not shown)\n"
    e = diff_entry("/f", b"a\n", b"a\n", 0o644, 0o755)
    assert e["before"].startswith("mode 0644") and e["after"].startswith("mode 0755")


def test_apply_writes_only_what_differs_and_a_second_run_changes_nothing(tmp_path):
    same = tmp_path / "same.sh"
    same.write_bytes(b"keep\n")
    same.chmod(0o755)
    before = same.stat().st_mtime_ns
    files = [f(str(same), b"keep\n", 0o755), f(str(tmp_path / "new" / "sub" / "unit.service"), b"[Unit]\n")]
    first = apply(files, [str(tmp_path / "state")])
    assert first["changed"] and first["changed_paths"] == [str(tmp_path / "new/sub/unit.service")]
    assert first["created_dirs"] == [str(tmp_path / "new"), str(tmp_path / "new/sub"), str(tmp_path / "state")]
    assert same.stat().st_mtime_ns == before  # untouched
    assert (tmp_path / "new/sub/unit.service").read_bytes() == b"[Unit]\n"
    assert stat.S_IMODE((tmp_path / "new/sub/unit.service").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o755
    assert apply(files, [str(tmp_path / "state")]) == {"changed": False, "changed_paths": [], "created_dirs": []}


def test_apply_fixes_a_mode_without_rewriting(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x\n")
    p.chmod(0o600)
    ino = p.stat().st_ino
    assert apply([f(str(p))])["changed_paths"] == [str(p)]
    assert stat.S_IMODE(p.stat().st_mode) == 0o644 and p.stat().st_ino == ino


def test_apply_in_check_mode_writes_nothing_and_tells_the_diff(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"old\n")
    got = apply([f(str(p), b"new\n"), f(str(tmp_path / "d" / "g"))], check_mode=True, want_diff=True)
    assert got["changed"] and got["changed_paths"] == [str(p), str(tmp_path / "d/g")]
    assert p.read_bytes() == b"old\n" and not (tmp_path / "d").exists()
    assert [(d["before"], d["after"]) for d in got["diff"]] == [("", "(directory)\n"), ("old\n", "new\n"), ("", "x\n")]


def test_apply_leaves_no_temporary_file_behind(tmp_path):
    apply([f(str(tmp_path / "a"), b"1"), f(str(tmp_path / "b"), b"2")])
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_module_writes_under_root_and_reports_paths_without_it(run_module, tmp_path):
    root = tmp_path / "render"
    args = {"root": str(root), "files": [{"dest": "/etc/x.conf", "content": "a=1\n", "mode": "0640"}],
            "directories": ["/var/lib/state"]}
    assert run_module("files", args, check_mode=True)["changed_paths"] == ["/etc/x.conf"]
    assert not root.exists()
    got = run_module("files", args)
    assert got["changed"] and got["changed_paths"] == ["/etc/x.conf"]
    assert (root / "etc/x.conf").read_text() == "a=1\n" and (root / "var/lib/state").is_dir()
    assert stat.S_IMODE((root / "etc/x.conf").stat().st_mode) == 0o640
    assert run_module("files", args)["changed"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_module_writes_through_atomic_move_keeping_an_existing_files_owner(run_module, tmp_path):
    # AnsibleModule.atomic_move gives the new content the old file's owner (a plain rename would leave the
    # temporary file's, root's); the mode is the one asked for, and a new file is the module's user's
    old = tmp_path / "prometheus.yml"
    old.write_text("old\n")
    old.chmod(0o644)
    os.chown(old, 4242, 4343)
    args = {"files": [{"dest": str(old), "content": "new\n", "mode": "0640"},
                      {"dest": str(tmp_path / "fresh"), "content": "x\n", "mode": "0600"}]}
    assert run_module("files", args)["changed_paths"] == [str(old), str(tmp_path / "fresh")]
    st = old.stat()
    assert old.read_text() == "new\n" and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4343, 0o640)
    st = (tmp_path / "fresh").stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith("-args.json")) == ["fresh", "prometheus.yml"]


def test_module_fails_naming_a_file_without_content(run_module, tmp_path):
    got = run_module("files", {"files": [{"dest": str(tmp_path / "t"), "template": "t.j2", "mode": "0644"}]})
    assert got["failed"] and "no content" in got["msg"] and str(tmp_path / "t") in got["msg"]


def test_validate_sees_the_new_content_before_the_rename_and_a_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "prometheus.yml"
    path.write_bytes(b"old: 1\n")
    seen = []

    def run(argv):
        seen.append((argv, open(argv[-1], "rb").read()))
        return (0, "") if b"good" in seen[-1][1] else (1, "FAILED: parsing YAML\n")
    bad = dict(f(str(path), b"bad: [\n"), validate=command_validator(str(path), "promtool check config %s", run))
    with pytest.raises(ValueError) as err:
        apply([bad])
    assert str(path) in str(err.value) and "promtool check config" in str(err.value) and "FAILED: parsing YAML" in str(err.value)
    assert path.read_bytes() == b"old: 1\n" and os.listdir(tmp_path) == ["prometheus.yml"]
    assert seen[0][0][:3] == ["promtool", "check", "config"] and seen[0][0][3] != str(path) and seen[0][1] == b"bad: [\n"
    good = dict(f(str(path), b"good: 1\n"), validate=command_validator(str(path), "promtool check config %s", run))
    assert apply([good])["changed_paths"] == [str(path)]
    assert path.read_bytes() == b"good: 1\n" and os.listdir(tmp_path) == ["prometheus.yml"]
    assert apply([good])["changed"] is False and len(seen) == 2  # nothing to write, nothing to validate


def test_validate_needs_the_placeholder():
    with pytest.raises(ValueError, match="must contain %s"):
        command_validator("/etc/x", "promtool check config", lambda argv: (0, ""))


def test_module_runs_validate_and_fails_naming_the_file(run_module, tmp_path):
    dest = tmp_path / "app.conf"
    dest.write_text("ok=1\n")
    args = {"files": [{"dest": str(dest), "content": "broken\n", "mode": "0644", "validate": "grep -q ok= %s"}]}
    got = run_module("files", args)
    assert got["failed"] and str(dest) in got["msg"] and "validation failed" in got["msg"], got
    assert dest.read_text() == "ok=1\n"
    args["files"][0]["content"] = "ok=2\n"
    assert run_module("files", args)["changed_paths"] == [str(dest)] and dest.read_text() == "ok=2\n"


def test_daemon_reload_only_for_a_changed_unit_or_drop_in():
    assert needs_daemon_reload(["/root/glm5/run_yr_worker.sh", "/etc/systemd/system/yr-worker.service"])
    assert needs_daemon_reload(["/etc/systemd/system/a3-vllm.service.d/override.conf"])
    assert not needs_daemon_reload(["/root/glm5/run_dp_template.sh", "/etc/ascend-vllm-pd/canary.env"])
    assert not needs_daemon_reload([])


def test_unit_actions_enable_what_is_not_enabled_and_start_only_what_is_asked():
    units = [{"name": "a3-vllm.service", "enabled": True, "started": False},
             {"name": "a3-vllm-canary.timer", "enabled": True, "started": True}]
    fresh = {"a3-vllm.service": {"enabled": "not-found", "active": "inactive"},
             "a3-vllm-canary.timer": {"enabled": "disabled", "active": "inactive"}}
    # the engines' service is started by the role's handler, never here
    assert unit_actions(units, fresh) == [["enable", "a3-vllm.service"], ["enable", "a3-vllm-canary.timer"],
                                          ["start", "a3-vllm-canary.timer"]]
    done = {"a3-vllm.service": {"enabled": "enabled", "active": "inactive"},
            "a3-vllm-canary.timer": {"enabled": "enabled", "active": "active"}}
    assert unit_actions(units, done) == []
    # a timer stopped by hand is started again; a unit not wanted at boot is left as it is
    assert unit_actions([{"name": "t.timer", "enabled": False, "started": True}],
                        {"t.timer": {"enabled": "disabled", "active": "failed"}}) == [["start", "t.timer"]]
