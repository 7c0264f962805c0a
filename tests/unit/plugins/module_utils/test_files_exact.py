# -*- coding: utf-8 -*-
"""plugins/module_utils/_files.py, pinned exactly: the modes it reads and refuses (with their messages), the
directories it creates, the plan's entries, the diff entries, the node's state of a path, the atomic write and
its validation (messages, temporary file, cleanup), apply's whole result, the paths that need a daemon-reload and
the systemctl calls of the units."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import (
    apply, command_validator, diff_entry, missing_dirs, needs_daemon_reload, parse_mode, plan, read_state,
    unit_actions, write_atomic)


def f(path, content=b"x\n", mode=0o644, **extra):
    return dict({"path": path, "content": content, "mode": mode}, **extra)


@pytest.fixture
def umask():
    """Set a process umask for one test (restored after)."""
    old = []

    def set_mask(value):
        old.append(os.umask(value))
    yield set_mask
    if old:
        os.umask(old[0])


# --- parse_mode -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("given, want", [
    (" 0644 ", 0o644), ("0644\n", 0o644), ("0", 0), (0, 0), ("7777", 0o7777), (0o7777, 0o7777), (420, 0o644),
    ("00755", 0o755), ("1", 1), (1, 1),
])
def test_parse_mode_reads_the_octal_forms(given, want):
    assert parse_mode(given) == want


@pytest.mark.parametrize("given, message", [
    ("rw-r--r--", "mode 'rw-r--r--' is not an octal permission such as '0644'"),
    ("0849", "mode '0849' is not an octal permission such as '0644'"),
    ("08", "mode '08' is not an octal permission such as '0644'"),
    ("9", "mode '9' is not an octal permission such as '0644'"),
    ("", "mode '' is not an octal permission such as '0644'"),
    ("  ", "mode '  ' is not an octal permission such as '0644'"),
    ("-644", "mode '-644' is not an octal permission such as '0644'"),
    (True, "mode True is not an octal permission such as '0644'"),
    (False, "mode False is not an octal permission such as '0644'"),
    (6.44, "mode 6.44 is not an octal permission such as '0644'"),
    (None, "mode None is not an octal permission such as '0644'"),
    (("0644",), "mode ('0644',) is not an octal permission such as '0644'"),
    ("17777", "mode '17777' is out of range"),
    ("76543210", "mode '76543210' is out of range"),
    ("10000", "mode '10000' is out of range"),
    (0o10000, "mode 4096 is out of range"),
    (-1, "mode -1 is out of range"),
])
def test_parse_mode_refuses_naming_the_value(given, message):
    with pytest.raises(ValueError) as err:
        parse_mode(given)
    assert str(err.value) == message


# --- missing_dirs -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dirs, have, want", [
    (["/a/b/c"], {"/"}, ["/a", "/a/b", "/a/b/c"]),
    (["/a/b/c/"], {"/", "/a"}, ["/a/b", "/a/b/c"]),
    (["/a/b//"], {"/", "/a"}, ["/a/b"]),
    (["/aX/bX/"], {"/"}, ["/aX", "/aX/bX"]),
    (["/a/b", "/a/c", "/a/b/d"], {"/"}, ["/a", "/a/b", "/a/c", "/a/b/d"]),
    (["/a", "/a/"], {"/"}, ["/a"]),
    (["/etc", "/etc/x"], {"/", "/etc"}, ["/etc/x"]),
    (["rel/sub"], set(), ["rel", "rel/sub"]),
    ([""], set(), []),
    (["/"], set(), []),
    ([], {"/"}, []),
])
def test_missing_dirs_lists_parents_first_each_once(dirs, have, want):
    asked = []

    def is_dir(d):
        asked.append(d)
        return d in have
    assert missing_dirs(dirs, is_dir) == want


def test_missing_dirs_does_not_ask_again_about_a_directory_it_will_create():
    asked = []

    def is_dir(d):
        asked.append(d)
        return d == "/"
    assert missing_dirs(["/a/b", "/a/b/c"], is_dir) == ["/a", "/a/b", "/a/b/c"]
    assert asked == ["/a/b", "/a", "/", "/a/b/c"]


# --- plan -------------------------------------------------------------------------------------------------------

def test_plan_entries_are_whole():
    files = [f("/new"), f("/content", b"new\n", 0o600), f("/mode", mode=0o755), f("/same", mode=0o4755),
             f("/setuid", mode=0o4755)]
    state = {"/new": None, "/content": {"kind": "file", "content": b"old\n", "mode": 0o100644},
             "/mode": {"kind": "file", "content": b"x\n", "mode": 0o100644},
             "/same": {"kind": "file", "content": b"x\n", "mode": 0o104755},
             "/setuid": {"kind": "file", "content": b"x\n", "mode": 0o100755}}
    assert plan(files, state) == [
        {"path": "/new", "action": "create", "before": None},
        {"path": "/content", "action": "update", "before": b"old\n"},
        {"path": "/mode", "action": "mode", "before": b"x\n"},
        {"path": "/setuid", "action": "mode", "before": b"x\n"},
    ]


def test_plan_of_a_path_the_node_does_not_report_is_a_create():
    assert plan([f("/unknown")], {"/unknown": None}) == [{"path": "/unknown", "action": "create", "before": None}]


@pytest.mark.parametrize("kind", ["dir", "other"])
def test_plan_refuses_what_is_not_a_regular_file_with_the_whole_message(kind):
    with pytest.raises(ValueError) as err:
        plan([f("/ok"), f("/etc/x")], {"/ok": None, "/etc/x": {"kind": kind, "content": None, "mode": 0o40755}})
    assert str(err.value) == "/etc/x exists and is not a regular file (%s); remove it or choose another path" % kind


# --- diff_entry -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, want", [
    (("/f", None, b"a\n"), {"before_header": "/f (absent)", "after_header": "/f", "before": "", "after": "a\n"}),
    (("/f", b"", b"a\n"), {"before_header": "/f", "after_header": "/f", "before": "", "after": "a\n"}),
    (("/f", b"old\n", b"new\n"), {"before_header": "/f", "after_header": "/f", "before": "old\n", "after": "new\n"}),
    (("/f", b"\xff\n", b"\xc3\xbc\n"), {"before_header": "/f", "after_header": "/f", "before": "\ufffd\n",
                                        "after": "\u00fc\n"}),
    (("/f", b"a\0b", b"ok"), {"before_header": "/f", "after_header": "/f", "before": "(3 bytes, not shown)\n",
                              "after": "ok"}),
    (("/f", b"x" * 65536, b"\0"), {"before_header": "/f", "after_header": "/f", "before": "x" * 65536,
                                   "after": "(1 bytes, not shown)\n"}),
    (("/f", b"x" * 65537, b""), {"before_header": "/f", "after_header": "/f", "before": "(65537 bytes, not shown)\n",
                                 "after": ""}),
    (("/f", b"a\n", b"a\n", 0o644, 0o755), {"before_header": "/f", "after_header": "/f", "before": "mode 0644\na\n",
                                            "after": "mode 0755\na\n"}),
    (("/f", b"a\n", b"b\n", 0o7, 0o4755), {"before_header": "/f", "after_header": "/f", "before": "mode 0007\na\n",
                                           "after": "mode 4755\nb\n"}),
    (("/f", b"a\n", b"b\n", 0, 0o644), {"before_header": "/f", "after_header": "/f", "before": "mode 0000\na\n",
                                        "after": "mode 0644\nb\n"}),
    (("/f", b"a\n", b"a\n", 0o644, 0o644), {"before_header": "/f", "after_header": "/f", "before": "a\n",
                                            "after": "a\n"}),
    (("/f", None, b"a\n", None, 0o644), {"before_header": "/f (absent)", "after_header": "/f", "before": "",
                                         "after": "a\n"}),
    (("/f", b"a\n", b"a\n", 0o644, None), {"before_header": "/f", "after_header": "/f", "before": "a\n",
                                           "after": "a\n"}),
])
def test_diff_entry_is_whole(args, want):
    assert diff_entry(*args) == want


# --- read_state -------------------------------------------------------------------------------------------------

def test_read_state_of_each_kind_of_path(tmp_path):
    regular = tmp_path / "f"
    regular.write_bytes(b"data\n")
    regular.chmod(0o640)
    assert read_state(str(regular)) == {"kind": "file", "mode": 0o100640, "content": b"data\n"}
    directory = tmp_path / "d"
    directory.mkdir()
    directory.chmod(0o750)
    assert read_state(str(directory)) == {"kind": "dir", "mode": 0o40750, "content": None}
    link = tmp_path / "link"
    link.symlink_to(regular)  # the link itself, not what it points to
    got = read_state(str(link))
    assert got["kind"] == "other" and got["content"] is None and stat.S_ISLNK(got["mode"])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert read_state(str(fifo)) == {"kind": "other", "mode": 0o10600, "content": None}
    assert read_state(str(tmp_path / "missing")) is None


# --- write_atomic and command_validator -------------------------------------------------------------------------

def test_write_atomic_writes_content_and_mode_through_a_hidden_temporary_file(tmp_path, umask):
    umask(0o077)
    target = tmp_path / "app.conf"
    target.write_bytes(b"old\n")
    seen = []

    def validate(tmp):
        seen.append((os.path.dirname(tmp), os.path.basename(tmp).startswith(".app.conf."),
                     open(tmp, "rb").read(), stat.S_IMODE(os.stat(tmp).st_mode), target.read_bytes()))
    write_atomic(str(target), b"new\n", 0o644, validate)
    assert seen == [(str(tmp_path), True, b"new\n", 0o644, b"old\n")]
    assert target.read_bytes() == b"new\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["app.conf"]


def test_write_atomic_of_a_relative_path_writes_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_atomic("plain", b"1", 0o600)
    assert (tmp_path / "plain").read_bytes() == b"1" and stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["plain"]


def test_write_atomic_keeps_the_old_file_and_no_temporary_when_validation_raises(tmp_path):
    target = tmp_path / "x"
    target.write_bytes(b"old")

    def refuse(tmp):
        raise KeyboardInterrupt("stop")  # any exception, not only an Exception
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(target), b"new", 0o644, refuse)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["x"]


def test_write_atomic_fails_on_a_missing_directory_and_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomic(str(tmp_path / "none" / "x"), b"1", 0o644)
    assert os.listdir(tmp_path) == []


def test_write_atomic_cleans_up_when_the_rename_fails(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "inner").write_bytes(b"")
    with pytest.raises(OSError):
        write_atomic(str(tmp_path / "d"), b"1", 0o644)  # a file cannot replace a non-empty directory
    assert sorted(os.listdir(tmp_path)) == ["d"]


def atomic_move_like(seen):
    """A move that sets modes as AnsibleModule.atomic_move does: the old file's mode copied onto the temporary file
    before the rename, a new file set to 0666 less the umask after it. ``seen`` gets the mode of the path right
    after each move (the moment the new content is in place)."""
    def move(tmp, path):
        creating = not os.path.exists(path)
        if not creating:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.rename(tmp, path)
        if creating:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(path, 0o666 & ~umask)
        seen.append(stat.S_IMODE(os.stat(path).st_mode))
    return move


@pytest.mark.parametrize("old_mode, mode, at_move", [
    (None, 0o600, 0o600),     # a new secret is never 0644, whatever the umask
    (None, 0o755, 0o644),     # a new script: 0666 & 0755, then its x bits
    (None, 0o4750, 0o640),
    (0o644, 0o600, 0o600),    # narrowing: the old file's wider mode is not copied onto the new content
    (0o600, 0o644, 0o600),    # widening happens after the move
    (0o755, 0o750, 0o750),
])
def test_write_atomic_through_a_move_that_sets_its_own_mode(tmp_path, umask, old_mode, mode, at_move):
    umask(0o022)
    target = tmp_path / "secret"
    if old_mode is not None:
        target.write_bytes(b"old")
        target.chmod(old_mode)
    seen = []
    write_atomic(str(target), b"new", mode, move=atomic_move_like(seen))
    assert seen == [at_move] and not at_move & ~mode
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == mode
    assert os.listdir(tmp_path) == ["secret"]
    assert os.umask(0o022) == 0o022  # restored


def test_write_atomic_restores_the_umask_and_cleans_up_when_the_move_raises(tmp_path, umask):
    umask(0o027)
    target = tmp_path / "x"
    target.write_bytes(b"old")
    target.chmod(0o644)
    masks = []

    def refuse(tmp, path):
        masks.append(os.umask(0o027))
        os.umask(masks[-1])
        raise OSError("refused")
    with pytest.raises(OSError, match="^refused$"):
        write_atomic(str(target), b"new", 0o640, move=refuse)
    assert masks == [0o137] and os.umask(0o027) == 0o027
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["x"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # narrowed before the move, never widened


def test_write_atomic_does_not_narrow_the_old_file_when_validation_refuses(tmp_path):
    target = tmp_path / "x"
    target.write_bytes(b"old")
    target.chmod(0o644)

    def refuse(tmp):
        raise ValueError("refused")
    with pytest.raises(ValueError):
        write_atomic(str(target), b"new", 0o600, refuse, move=lambda tmp, path: pytest.fail("moved"))
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 and target.read_bytes() == b"old"


def test_apply_writes_each_changed_file_through_the_move_it_is_given(tmp_path):
    (tmp_path / "same").write_bytes(b"x\n")
    (tmp_path / "same").chmod(0o644)
    (tmp_path / "mode").write_bytes(b"x\n")
    (tmp_path / "mode").chmod(0o600)
    moved = []

    def move(tmp, path):
        moved.append((os.path.dirname(tmp), path))
        os.rename(tmp, path)
    files = [f(str(tmp_path / "same")), f(str(tmp_path / "mode")), f(str(tmp_path / "new")), f(str(tmp_path / "d" / "n"))]
    assert apply(files, move=move)["changed_paths"] == [str(tmp_path / p) for p in ("mode", "new", "d/n")]
    # one move per written file, from its own directory; a mode-only change and an unchanged file need none
    assert moved == [(str(tmp_path), str(tmp_path / "new")), (str(tmp_path / "d"), str(tmp_path / "d" / "n"))]
    pending = [f(str(tmp_path / "later"), b"y\n")]
    assert apply(pending, check_mode=True, move=lambda tmp, path: pytest.fail("moved"))["changed_paths"] == [
        str(tmp_path / "later")]
    assert sorted(os.listdir(tmp_path)) == ["d", "mode", "new", "same"]


@pytest.mark.parametrize("command", ["promtool check config", "", "check %d"])
def test_command_validator_needs_the_placeholder(command):
    with pytest.raises(ValueError) as err:
        command_validator("/etc/x", command, lambda argv: pytest.fail("ran"))
    assert str(err.value) == "/etc/x: validate must contain %%s (the file to check): %r" % command


@pytest.mark.parametrize("rc, output, message", [
    (1, "FAILED: parsing YAML\n", "/etc/p.yml: validation failed, the file was not written "
                                  "(sh -c test -s %s --flag exited 1): FAILED: parsing YAML"),
    (2, "  \n", "/etc/p.yml: validation failed, the file was not written (sh -c test -s %s --flag exited 2): "),
    (-9, "", "/etc/p.yml: validation failed, the file was not written (sh -c test -s %s --flag exited -9): "),
])
def test_command_validator_runs_the_command_on_the_temporary_file_and_names_the_failure(rc, output, message):
    calls = []

    def run(argv):
        calls.append(argv)
        return rc, output
    validate = command_validator("/etc/p.yml", "sh -c 'test -s %s' --flag", run)
    with pytest.raises(ValueError) as err:
        validate("/etc/.p.yml.tmp1")
    assert str(err.value) == message
    assert calls == [["sh", "-c", "test -s /etc/.p.yml.tmp1", "--flag"]]


def test_command_validator_passes_on_exit_zero_and_replaces_every_placeholder():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "ignored output"
    assert command_validator("/f", "diff %s %s.orig", run)("/t") is None
    assert calls == [["diff", "/t", "/t.orig"]]


# --- apply ------------------------------------------------------------------------------------------------------

def test_apply_creates_directories_with_their_mode_whatever_the_umask(tmp_path, umask):
    umask(0o077)
    got = apply([f(str(tmp_path / "a" / "f"))], [str(tmp_path / "b")], directory_mode=0o751)
    assert got == {"changed": True, "changed_paths": [str(tmp_path / "a" / "f")],
                   "created_dirs": [str(tmp_path / "a"), str(tmp_path / "b")]}
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o751
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o751
    assert stat.S_IMODE((tmp_path / "a" / "f").stat().st_mode) == 0o644


def test_apply_default_directory_mode_is_0755(tmp_path, umask):
    umask(0o077)
    assert apply([], [str(tmp_path / "d")]) == {"changed": True, "changed_paths": [],
                                                "created_dirs": [str(tmp_path / "d")]}
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755


def test_apply_with_nothing_to_do_is_unchanged_and_has_no_diff_unless_asked(tmp_path):
    (tmp_path / "f").write_bytes(b"x\n")
    (tmp_path / "f").chmod(0o644)
    assert apply([f(str(tmp_path / "f"))], [str(tmp_path)]) == {"changed": False, "changed_paths": [],
                                                                "created_dirs": []}
    assert apply([f(str(tmp_path / "f"))], want_diff=True) == {"changed": False, "changed_paths": [],
                                                               "created_dirs": [], "diff": []}


def test_apply_diff_is_whole_for_a_directory_a_create_an_update_and_a_mode(tmp_path):
    (tmp_path / "upd").write_bytes(b"old\n")
    (tmp_path / "upd").chmod(0o600)
    (tmp_path / "mode").write_bytes(b"m\n")
    (tmp_path / "mode").chmod(0o600)
    new = str(tmp_path / "sub" / "new")
    got = apply([f(new, b"n\n"), f(str(tmp_path / "upd"), b"new\n", 0o640), f(str(tmp_path / "mode"), b"m\n", 0o755)],
                want_diff=True)
    assert got == {
        "changed": True, "changed_paths": [new, str(tmp_path / "upd"), str(tmp_path / "mode")],
        "created_dirs": [str(tmp_path / "sub")],
        "diff": [
            {"before_header": str(tmp_path / "sub"), "after_header": str(tmp_path / "sub"), "before": "",
             "after": "(directory)\n"},
            {"before_header": new + " (absent)", "after_header": new, "before": "", "after": "n\n"},
            {"before_header": str(tmp_path / "upd"), "after_header": str(tmp_path / "upd"),
             "before": "mode 0600\nold\n", "after": "mode 0640\nnew\n"},
            {"before_header": str(tmp_path / "mode"), "after_header": str(tmp_path / "mode"),
             "before": "mode 0600\nm\n", "after": "mode 0755\nm\n"},
        ]}
    assert (tmp_path / "upd").read_bytes() == b"new\n" and stat.S_IMODE((tmp_path / "upd").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "mode").stat().st_mode) == 0o755
    assert (tmp_path / "sub" / "new").read_bytes() == b"n\n"


def test_apply_in_check_mode_creates_no_directory(tmp_path):
    got = apply([], [str(tmp_path / "d" / "e")], check_mode=True)
    assert got == {"changed": True, "changed_paths": [], "created_dirs": [str(tmp_path / "d"), str(tmp_path / "d/e")]}
    assert os.listdir(tmp_path) == []


def test_apply_does_not_revalidate_a_mode_only_change_but_validates_a_content_change(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x\n")
    p.chmod(0o600)
    refused = []

    def refuse(tmp):
        refused.append(open(tmp, "rb").read())
        raise ValueError("refused")
    assert apply([f(str(p), validate=refuse)])["changed_paths"] == [str(p)]
    assert stat.S_IMODE(p.stat().st_mode) == 0o644 and refused == []
    with pytest.raises(ValueError, match="^refused$"):
        apply([f(str(p), b"y\n", validate=refuse)])
    assert refused == [b"y\n"] and p.read_bytes() == b"x\n"


def test_apply_refuses_a_directory_in_the_place_of_a_file_before_writing_anything(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError) as err:
        apply([f(str(tmp_path / "a")), f(str(tmp_path / "d"))])
    assert str(err.value) == "%s exists and is not a regular file (dir); remove it or choose another path" % (
        tmp_path / "d")
    assert os.listdir(tmp_path) == ["d"]


# --- daemon-reload and units ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, want", [
    ("/etc/systemd/system/a.service", True),
    ("/run/systemd/system/a.service", True),
    ("/usr/lib/systemd/system/a.service", True),
    ("/lib/systemd/system/a.service", True),
    ("/usr/local/lib/systemd/system/a.service", True),
    ("/etc/systemd/system/a.service.d/override.conf", True),
    ("/etc/systemdx/a.service", False),
    ("/etc/a.service", False),
    ("etc/systemd/system/a.service", False),
    ("/usr/local/lib/systemd", False),
])
def test_needs_daemon_reload_for_each_systemd_directory(path, want):
    assert needs_daemon_reload(["/root/x.sh", path]) is want


def test_unit_actions_defaults_enable_and_do_not_start():
    assert unit_actions([{"name": "a.service"}], {}) == [["enable", "a.service"]]
    assert unit_actions([{"name": "a.service"}], {"a.service": {"enabled": "enabled", "active": "inactive"}}) == []
    assert unit_actions([{"name": "t.timer", "started": True}], {}) == [["enable", "t.timer"], ["start", "t.timer"]]
    assert unit_actions([{"name": "t.timer", "enabled": False, "started": True}],
                        {"t.timer": {"enabled": "disabled", "active": "active"}}) == []
    assert unit_actions([{"name": "t.timer", "enabled": False, "started": False}], {}) == []
    assert unit_actions([], {}) == []
