# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a role's files in one module call: the plan (what differs) is a pure function of the desired files and
what the node has; the module (plugins/modules/files.py) reads, plans, applies.

A file is a dict ``path`` (absolute), ``content`` (bytes), ``mode`` (int). The node's state of a path is None
(missing) or a dict ``content`` (bytes), ``mode`` (int), ``kind`` ("file", "dir", "other")."""
from __future__ import annotations

import os
import shlex
import stat
import tempfile

DIFF_LIMIT = 64 * 1024  # larger or binary contents show as a header only in --diff


def parse_mode(value) -> int:
    """'0644', '644', 0o644 or 420 -> 0o644; anything else raises ValueError naming the value."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str) and value.strip().isdigit() and set(value.strip()) <= set("01234567"):
        mode = int(value.strip(), 8)
    else:
        raise ValueError("mode %r is not an octal permission such as '0644'" % (value,))
    if not 0 <= mode <= 0o7777:
        raise ValueError("mode %r is out of range" % (value,))
    return mode


def missing_dirs(dirs, is_dir) -> list:
    """The directories to create, parents first and each once, so that every one of ``dirs`` exists;
    ``is_dir(path)`` tells whether a directory exists on the node."""
    out = []
    for d in dirs:
        chain = []
        d = d.rstrip("/")
        while d and d not in out and not is_dir(d):
            chain.append(d)
            d = os.path.dirname(d)
        out.extend(reversed(chain))
    return out


def plan(files, state) -> list:
    """One entry per file that must change: ``path``, ``action`` (create / update / mode) and, for the diff,
    ``before`` (bytes or None). Files already in the desired state are left out. A path that exists as a
    directory or anything but a regular file raises ValueError naming it (nothing is replaced blindly)."""
    changes = []
    for f in files:
        cur = state.get(f["path"])
        if cur is None:
            changes.append({"path": f["path"], "action": "create", "before": None})
        elif cur["kind"] != "file":
            raise ValueError("%s exists and is not a regular file (%s); remove it or choose another path"
                             % (f["path"], cur["kind"]))
        elif cur["content"] != f["content"]:
            changes.append({"path": f["path"], "action": "update", "before": cur["content"]})
        elif stat.S_IMODE(cur["mode"]) != f["mode"]:
            changes.append({"path": f["path"], "action": "mode", "before": cur["content"]})
    return changes


def diff_entry(path: str, before, after: bytes, before_mode=None, after_mode=None) -> dict:
    """One entry of Ansible's diff list (the callback prints before/after as a unified diff)."""
    def text(data):
        if data is None:
            return ""
        if len(data) > DIFF_LIMIT or b"\0" in data:
            return "(%d bytes, not shown)\n" % len(data)
        return data.decode("utf-8", "replace")
    entry = {"before_header": path if before is not None else "%s (absent)" % path, "after_header": path,
             "before": text(before), "after": text(after)}
    if before_mode is not None and after_mode is not None and before_mode != after_mode:
        entry["before"] = "mode %04o\n%s" % (before_mode, entry["before"])
        entry["after"] = "mode %04o\n%s" % (after_mode, entry["after"])
    return entry


def read_state(path: str):
    """The node's state of ``path`` (see the module docstring); reads a regular file's content."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return {"kind": "dir", "mode": st.st_mode, "content": None}
    if not stat.S_ISREG(st.st_mode):
        return {"kind": "other", "mode": st.st_mode, "content": None}
    with open(path, "rb") as fh:
        return {"kind": "file", "mode": st.st_mode, "content": fh.read()}


def write_atomic(path: str, content: bytes, mode: int, validate=None, move=os.rename) -> None:
    """Write through a temporary file in the same directory, then ``move(tmp, path)`` over ``path``. ``validate``,
    when given, is called with the temporary file's path before the move; it raises to keep the old file.

    The module passes AnsibleModule.atomic_move as ``move``: it keeps the old file's owner and SELinux context (a new
    file gets the directory's default context) and falls back to a copy in the same directory when a rename is
    refused. It also sets a mode of its own, the old file's (copied onto the temporary file before its rename) or,
    for a new file, 0666 less the umask; ``mode`` is therefore set again after the move, and until then the new
    content is never readable more widely than ``mode`` allows: the old file is narrowed first and, for a new file,
    the umask hides every bit ``mode`` lacks."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if validate is not None:
            validate(tmp)
        _narrow(path, mode)
        umask = os.umask(0o777 & ~mode)
        try:
            move(tmp, path)
        finally:
            os.umask(umask)
        os.chmod(path, mode)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _narrow(path: str, mode: int) -> None:
    """Take from the regular file at ``path`` (if any) the permission bits ``mode`` lacks: a move that copies the old
    file's mode onto the new content then grants nothing ``mode`` does not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)


def command_validator(path: str, command: str, run):
    """A validate callable for write_atomic: ``command`` with ``%s`` replaced by the temporary file, run through
    ``run(argv) -> (rc, output)``; a non-zero exit raises ValueError naming ``path`` and the command's output."""
    if "%s" not in command:
        raise ValueError("%s: validate must contain %%s (the file to check): %r" % (path, command))

    def validate(tmp):
        argv = [part.replace("%s", tmp) for part in shlex.split(command)]
        rc, output = run(argv)
        if rc != 0:
            raise ValueError("%s: validation failed, the file was not written (%s exited %d): %s"
                             % (path, " ".join(shlex.split(command)), rc, output.strip()))
    return validate


def apply(files, directories=(), directory_mode=0o755, check_mode=False, want_diff=False, move=os.rename) -> dict:
    """Read, plan and (unless ``check_mode``) write: ``changed``, ``changed_paths`` (files whose content or mode
    changed), ``created_dirs`` and, with ``want_diff``, ``diff`` (a list). Each changed file is written through
    ``move`` (see write_atomic); a file with a ``validate`` callable is checked before its move; a mode-only change
    is not revalidated."""
    files = list(files)
    state = {f["path"]: read_state(f["path"]) for f in files}
    changes = plan(files, state)
    dirs = missing_dirs([os.path.dirname(f["path"]) for f in files] + list(directories), os.path.isdir)
    by_path = {f["path"]: f for f in files}
    if not check_mode:
        for d in dirs:
            os.mkdir(d, directory_mode)
            os.chmod(d, directory_mode)  # the umask does not narrow it
        for c in changes:
            f = by_path[c["path"]]
            if c["action"] == "mode":
                os.chmod(c["path"], f["mode"])
            else:
                write_atomic(c["path"], f["content"], f["mode"], f.get("validate"), move)
    result = {"changed": bool(changes or dirs), "changed_paths": [c["path"] for c in changes], "created_dirs": dirs}
    if want_diff:
        result["diff"] = [{"before_header": d, "after_header": d, "before": "", "after": "(directory)\n"}
                          for d in dirs]
        for c in changes:
            f = by_path[c["path"]]
            cur = state[c["path"]]
            result["diff"].append(diff_entry(c["path"], c["before"], f["content"],
                                             stat.S_IMODE(cur["mode"]) if cur else None, f["mode"]))
    return result


# Where systemd reads units and drop-ins: a changed file there needs a daemon-reload before systemd acts on it.
SYSTEMD_DIRS = ("/etc/systemd/", "/run/systemd/", "/usr/lib/systemd/", "/lib/systemd/", "/usr/local/lib/systemd/")


def needs_daemon_reload(changed_paths) -> bool:
    return any(p.startswith(SYSTEMD_DIRS) for p in changed_paths)


def unit_actions(units, state) -> list:
    """The systemctl calls (argument lists) that leave each of ``units`` (dicts ``name``, ``enabled``, ``started``)
    enabled at boot and running when asked: ``state`` is {name: {"enabled": the word of systemctl is-enabled,
    "active": the word of systemctl is-active}}. A unit that is already so gets no call; nothing here stops or
    disables (the roles' stop and teardown playbooks do)."""
    actions = []
    for u in units:
        cur = state.get(u["name"], {})
        if u.get("enabled", True) and cur.get("enabled") != "enabled":
            actions.append(["enable", u["name"]])
        if u.get("started", False) and cur.get("active") != "active":
            actions.append(["start", u["name"]])
    return actions
