#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: support_bundle
short_description: Collect a node's diagnostics with secrets redacted, or write them into one support archive
description:
  - "With O(state=collect) (on a node), runs each of O(commands) with its own timeout (several at once, all within
    O(deadline)) and reads the tail of each of O(files) (globs expanded), redacts every answer on the node (the
    literal values of O(secrets) and the secret forms of the collection's C(_redact) helper: PEM private keys,
    C(Authorization) headers, C(Bearer) tokens, C(--api-key X), C(VLLM_API_KEY=...), C(*_TOKEN=), C(*_PASSWORD=),
    C(*_SECRET=), secret keys in JSON and YAML, URL passwords) and returns the redacted text in RV(collected).
    A command that is not installed, times out or fails, and a file that is absent, is recorded with the reason;
    nothing fails the module."
  - A file named like a secret (C(*.key), C(*secret*), C(*api_key*), C(*token*), C(*.pem), ...) or matching
    O(exclude) is never read; it is listed as C(excluded).
  - Each command runs without a shell under coreutils' C(timeout) (TERM after its timeout, KILL 5 seconds later, to
    its whole process group); its output is read through pipes and its last O(max_bytes) kept, so commands that
    bound their own output (C(journalctl -n), C(docker logs --tail)) belong here.
  - With O(state=collect) the module only reads. It writes nothing on the node.
  - "With O(state=archive) (on the controller, C(delegate_to=localhost)), writes O(hosts) (each host's registered
    result of O(state=collect), or what made it fail or unreachable) into one C(.tar.gz) under O(dest), redacted
    again with O(secrets), with C(manifest.json) (every host of O(expected_hosts): what was collected, what failed
    and why) and C(README.txt)."
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
requirements:
  - C(timeout) from coreutils (or busybox) on the node, for O(state=collect) with O(commands).
options:
  state:
    description: Collect on the node, or write the archive on the controller.
    type: str
    choices: [collect, archive]
    default: collect
  commands:
    description: Commands to run (O(state=collect)); each one's output is archived as its O(commands[].name).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Path of the output in the host's directory of the archive (relative, e.g. C(journal/x.log)).
        type: str
        required: true
      argv:
        description:
          - The command, without a shell. A bare program name is looked up in E(PATH) and O(search_dirs).
        type: list
        elements: str
        required: true
      timeout:
        description: Seconds the command may take (then it and its process group are killed); default O(timeout).
        type: int
      stdin:
        description:
          - Text given to the command on its standard input (e.g. a curl config carrying a header). Without it the
            command inherits the module's input (at its end once the module runs).
        type: str
  files:
    description: Files to read (O(state=collect)); archived under C(files/<path>).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path or glob.
        type: str
        required: true
      max_bytes:
        description: Read at most the last this many bytes (a log's tail); default O(max_bytes).
        type: int
  exclude:
    description: Globs of paths never read (the secret files of the deployment), besides the names that look secret.
    type: list
    elements: str
    default: []
  secrets:
    description: Literal values replaced by C([REDACTED]) wherever they occur (values of fewer than 4 characters only
      where a secret form names them).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds one command may take when it sets no timeout of its own.
    type: int
    default: 30
  deadline:
    description: Seconds all commands may take together; a command not started by then is recorded as C(skipped).
    type: int
    default: 600
  workers:
    description: Commands run at the same time.
    type: int
    default: 8
  max_bytes:
    description: Bytes kept of one command's output or one file (the tail).
    type: int
    default: 1048576
  max_files:
    description: Files read per glob at most (the newest first are not preferred; the first in sorted order).
    type: int
    default: 200
  search_dirs:
    description: Directories searched for a bare program name besides E(PATH).
    type: list
    elements: str
    default: [/usr/local/bin, /usr/local/sbin, /usr/local/Ascend/driver/tools, /usr/bin, /usr/sbin, /bin, /sbin]
  dest:
    description:
      - Directory of the archive (O(state=archive)), created when missing; the archive is
        C(<dest>/a3-support-<UTC time>.tar.gz). A path ending in C(.tar.gz) names the archive itself.
    type: path
  hosts:
    description: "O(state=archive): C({host: the registered result of O(state=collect) on that host})."
    type: dict
    default: {}
  expected_hosts:
    description: O(state=archive) - every host the bundle should cover; one missing from O(hosts) is listed as not run.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ascend.vllm_pd.attributes
attributes:
  check_mode:
    description: O(state=collect) only reads and runs the same in check mode; O(state=archive) writes nothing in check
      mode and returns the manifest and the path it would write.
    support: full
notes:
  - The archive is written with mode C(0600) through a temporary file beside it, then renamed.
  - Give O(secrets), and O(commands[].stdin) when it holds one, from a task with C(no_log).
seealso:
  - module: ascend.vllm_pd.npu_smi_info
  - module: ascend.vllm_pd.hccn_check
"""

EXAMPLES = r"""
- name: Read the node, redacted on the node
  ascend.vllm_pd.support_bundle:
    commands:
      - {name: journal/ascend-vllm.service.log, argv: [journalctl, -u, ascend-vllm.service, --no-pager, -n, "2000"]}
      - {name: npu/npu-smi-info.txt, argv: [npu-smi, info], timeout: 30}
    files:
      - {path: /var/lib/ascend-vllm-pd/vllm_log.log, max_bytes: 4194304}
      - {path: "/var/lib/ascend-vllm-pd/*.sh"}
    exclude: [/var/lib/ascend-vllm-pd/proxy-secrets.json]
    secrets: "{{ [vllm_api_key] }}"
  register: bundle_node
  ignore_unreachable: true
  failed_when: false
  no_log: true

- name: Write the archive on the controller
  ascend.vllm_pd.support_bundle:
    state: archive
    dest: /tmp
    hosts: "{{ {inventory_hostname: bundle_node} }}"
    expected_hosts: "{{ groups['prefill'] + groups['decode'] }}"
    secrets: "{{ [vllm_api_key] }}"
  delegate_to: localhost
  run_once: true
  no_log: true
"""

RETURN = r"""
collected:
  description: O(state=collect) - one entry per command and per file, in the order given (globs expanded).
  returned: state is collect
  type: list
  elements: dict
  contains:
    name:
      description: Path in the host's directory of the archive.
      type: str
    kind:
      description: C(command) or C(file).
      type: str
    source:
      description: The command line, or the file's path.
      type: str
    status:
      description: C(ok), C(failed) (non-zero exit), C(timeout), C(missing) (program not installed), C(absent) (no
        such file), C(excluded) (a secret file, never read), C(skipped) (the deadline passed) or C(error).
      type: str
    rc:
      description: The command's exit code (null when it did not end by itself).
      type: int
    error:
      description: Why the status is not C(ok) (empty when it is).
      type: str
    stderr:
      description: The tail of the command's standard error, redacted.
      type: str
    content:
      description: The output or the file's tail, redacted (bytes that are not UTF-8 shown as C(\xNN)).
      type: str
    bytes:
      description: Bytes of output or of the file (before the tail was taken).
      type: int
    truncated:
      description: Only the tail was kept.
      type: bool
    redactions:
      description: Values replaced by C([REDACTED]).
      type: int
summary:
  description: O(state=collect) - items per status.
  returned: state is collect
  type: dict
  sample: {ok: 40, missing: 2, timeout: 1}
path:
  description: O(state=archive) - the archive written (or that would be, in check mode).
  returned: state is archive
  type: str
  sample: /home/op/a3-support-20260101T120000Z.tar.gz
manifest:
  description: O(state=archive) - the archive's manifest.json.
  returned: state is archive
  type: dict
hosts_status:
  description: O(state=archive) - each host's status in the manifest (C(collected), C(partial), C(unreachable),
    C(failed), C(not run)) with its reason.
  returned: state is archive
  type: dict
  sample: {p0: collected, d1: "unreachable: Failed to connect to the host via ssh"}
"""

import datetime
import glob
import io
import json
import os
import re
import shlex
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._redact import (
    MARK, is_secret_path, redact_bytes, redactions)

STDERR_BYTES = 65536
NAME_RE = re.compile(r"^[A-Za-z0-9_.@:+-]+(?:/[A-Za-z0-9_.@:+-]+)*$")
MANIFEST_FORMAT = 1


# --- collect (on the node) ------------------------------------------------------------------------------------------

def _text(data):
    """Bytes as text: UTF-8, other bytes as \\xNN (the redaction already ran on the bytes)."""
    return data.decode("utf-8", "backslashreplace")


def _tail(data, limit):
    """The last ``limit`` bytes, from a line's start when the cut fell inside a line."""
    if len(data) <= limit:
        return data
    data = data[-limit:]
    cut = data.find(b"\n")
    return data[cut + 1:] if 0 <= cut < len(data) - 1 else data


def run_bounded(runner, timeout_bin, argv, timeout, stdin=None, limit=1048576):
    """Run argv (no shell) under coreutils' timeout: TERM after ``timeout`` seconds, KILL 5 s later, to its whole
    process group. ``runner`` is AnsibleModule.run_command.

    Returns {'status': ok|failed|timeout|error, 'rc', 'stdout', 'stderr', 'bytes', 'truncated', 'error'} with the
    tails of stdout (``limit`` bytes) and stderr (STDERR_BYTES)."""
    started = time.monotonic()
    try:
        rc, out, err = runner([timeout_bin, "-k", "5", str(timeout)] + list(argv),
                              data=stdin.encode("utf-8", "surrogateescape") if stdin else None, binary_data=True,
                              encoding=None, expand_user_and_vars=False, handle_exceptions=False,
                              environ_update={"PAGER": "cat", "SYSTEMD_PAGER": "cat", "SYSTEMD_COLORS": "0"})
    except OSError as exc:
        return {"status": "error", "rc": None, "stdout": b"", "stderr": b"", "bytes": 0, "truncated": False,
                "error": "cannot run %s: %s" % (argv[0], exc.strerror or exc)}
    # timeout exits 124 when it ended the command with TERM, 128 + 9 when KILL was needed
    timed_out = rc in (124, 137) and time.monotonic() - started >= timeout - 0.5
    stdout = _tail(out or b"", limit)
    result = {"rc": None if timed_out else rc, "stdout": stdout, "stderr": _tail(err or b"", STDERR_BYTES),
              "bytes": len(out or b""), "truncated": len(out or b"") > len(stdout)}
    if timed_out:
        result.update(status="timeout", error="no answer within %ss (killed)" % timeout)
    elif rc != 0:
        result.update(status="failed", error="exit %s" % rc)
    else:
        result.update(status="ok", error="")
    return result


def read_tail(path, limit):
    """(tail bytes, size, truncated) of a file, reading only its last ``limit`` bytes (from a line's start)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= limit:
            return fh.read(), size, False
        fh.seek(size - limit - 1)
        data = fh.read(limit + 1)
    # one byte more than the tail: a tail that starts exactly at a line's start keeps that line
    cut = data.find(b"\n")
    return (data[cut + 1:] if cut >= 0 else data[1:]), size, True


def _item(name, kind, source, status, error="", **extra):
    item = {"name": name, "kind": kind, "source": source, "status": status, "rc": None, "error": error,
            "stderr": "", "content": "", "bytes": 0, "truncated": False, "redactions": 0}
    item.update(extra)
    return item


def _redacted(data, secrets):
    counts = {}
    data = redact_bytes(data, secrets, counts)
    return _text(data), redactions(counts)


def expand_files(files, max_files):
    """(path, max_bytes, pattern) of every file to read: a glob's matches (sorted, at most max_files), a plain path as
    it is (absent or not)."""
    out = []
    for entry in files:
        pattern = entry["path"]
        if glob.has_magic(pattern):
            matches = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))[:max_files]
            out.extend((p, entry.get("max_bytes"), pattern) for p in matches)
            if not matches:
                out.append((pattern, entry.get("max_bytes"), pattern))
        else:
            out.append((pattern, entry.get("max_bytes"), pattern))
    return out


def collect_file(path, limit, exclude, secrets, pattern=None):
    name = "files/" + path.lstrip("/")
    # a symbolic link is judged by what it points to as well
    if is_secret_path(path, exclude) or is_secret_path(os.path.realpath(path), exclude):
        return _item(name, "file", path, "excluded", "a secret file: never collected")
    if pattern and glob.has_magic(pattern) and path == pattern:
        return _item(name, "file", path, "absent", "no file matches")
    if not os.path.lexists(path):
        return _item(name, "file", path, "absent", "no such file")
    if not os.path.isfile(path):
        return _item(name, "file", path, "error", "not a regular file")
    try:
        data, size, truncated = read_tail(path, limit)
    except OSError as exc:
        return _item(name, "file", path, "error", "cannot read: %s" % (exc.strerror or exc))
    content, count = _redacted(data, secrets)
    return _item(name, "file", path, "ok", content=content, bytes=size, truncated=truncated, redactions=count)


def collect_command(cmd, which, runner, timeout_bin, defaults, secrets, deadline_at):
    argv = [str(a) for a in cmd["argv"]]
    source = " ".join(shlex.quote(a) for a in argv)
    name = cmd["name"]
    if time.monotonic() > deadline_at:
        return _item(name, "command", source, "skipped", "the deadline of %ss passed before it started"
                     % defaults["deadline"])
    program = which(argv[0])
    if not program:
        return _item(name, "command", source, "missing", "%s: command not found" % argv[0])
    if not timeout_bin:
        return _item(name, "command", source, "error", "not run: coreutils' timeout is not installed (every command "
                                                       "runs under it)")
    timeout = cmd.get("timeout") or defaults["timeout"]
    timeout = max(1, min(timeout, int(deadline_at - time.monotonic()) + 1))
    started = time.monotonic()
    run = run_bounded(runner, timeout_bin, [program] + argv[1:], timeout, cmd.get("stdin"), defaults["max_bytes"])
    content, count = _redacted(run["stdout"], secrets)
    stderr, err_count = _redacted(run["stderr"], secrets)
    return _item(name, "command", source, run["status"], run["error"], rc=run["rc"], stderr=stderr,
                 content=content, bytes=run["bytes"], truncated=run["truncated"], redactions=count + err_count,
                 elapsed_s=round(time.monotonic() - started, 3))


def collect(params, which, runner):
    """Every command and file of the params, redacted; ``which(program)`` resolves a program name or returns None,
    ``runner`` is AnsibleModule.run_command."""
    secrets = [s for s in params["secrets"] or [] if s]
    commands = params["commands"] or []
    for cmd in commands:
        # the secrets given on a command's input are redacted wherever they show up
        if cmd.get("stdin"):
            secrets.extend(re.findall(r"Bearer\s+([^\s\"']+)", cmd["stdin"]))
    timeout_bin = which("timeout") if commands else None
    deadline_at = time.monotonic() + params["deadline"]
    with ThreadPoolExecutor(max_workers=max(1, params["workers"])) as pool:
        ran = list(pool.map(lambda c: collect_command(c, which, runner, timeout_bin, params, secrets, deadline_at),
                            commands))
    read = [collect_file(path, limit or params["max_bytes"], params["exclude"], secrets, pattern)
            for path, limit, pattern in expand_files(params["files"] or [], params["max_files"])]
    items = ran + read
    summary = {}
    for item in items:
        summary[item["status"]] = summary.get(item["status"], 0) + 1
    return items, summary


def _check_names(commands):
    bad = [c["name"] for c in commands if not NAME_RE.match(c["name"] or "") or ".." in c["name"].split("/")]
    dupes = sorted(set(c["name"] for c in commands if [d["name"] for d in commands].count(c["name"]) > 1))
    empty = [c["name"] for c in commands if not c["argv"]]
    problems = []
    if bad:
        problems.append("names must be relative paths of letters, digits and ._@:+- (no ..): %s" % ", ".join(bad))
    if dupes:
        problems.append("names repeat: %s" % ", ".join(dupes))
    if empty:
        problems.append("argv is empty: %s" % ", ".join(empty))
    return problems


# --- archive (on the controller) ------------------------------------------------------------------------------------

def _short(text, limit=2000):
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]


def host_entry(host, result, secrets):
    """(manifest entry, {archive path under the host: bytes}) of one host's registered result."""
    files = {}
    if result is None:
        return {"status": "not run", "reason": "not in this run (--limit, or the play never reached it)",
                "items": []}, files
    if not isinstance(result, dict):
        result = {"msg": str(result)}
    why = redact_bytes(str(result.get("msg") or result.get("module_stderr") or result.get("exception") or ""),
                       secrets).decode("utf-8", "backslashreplace").strip()
    if result.get("unreachable"):
        files["UNREACHABLE.txt"] = ("unreachable: %s\n" % why).encode("utf-8")
        return {"status": "unreachable", "reason": _short(why) or "unreachable", "items": []}, files
    if result.get("skipped"):
        return {"status": "skipped", "reason": _short(why) or "skipped", "items": []}, files
    if not isinstance(result.get("collected"), list):
        files["ERROR.txt"] = ("the collection failed on this host: %s\n" % (why or "no result")).encode("utf-8")
        return {"status": "failed", "reason": _short(why) or "the module returned no result", "items": []}, files
    items = []
    for item in result["collected"]:
        name = str(item.get("name", ""))
        if not NAME_RE.match(name) or ".." in name.split("/"):
            name = "invalid/%d" % len(items)
        entry = {k: item.get(k) for k in ("name", "kind", "source", "status", "rc", "error", "bytes", "truncated",
                                          "redactions", "elapsed_s") if k in item}
        entry["name"] = name
        counts = {}
        content = redact_bytes(str(item.get("content") or ""), secrets, counts)
        stderr = redact_bytes(str(item.get("stderr") or ""), secrets, counts)
        entry["redactions"] = int(item.get("redactions") or 0) + redactions(counts)
        entry["error"] = redact_bytes(str(item.get("error") or ""), secrets).decode("utf-8", "backslashreplace")
        if item.get("status") == "ok" or content:
            files[name] = content
            entry["archived_as"] = "%s/%s" % (host, name)
        if stderr.strip():
            files[name + ".stderr"] = stderr
            entry["stderr_archived_as"] = "%s/%s.stderr" % (host, name)
            entry["stderr_tail"] = _short(stderr.decode("utf-8", "backslashreplace"), 500)
        items.append(entry)
    problems = [i for i in items if i["status"] not in ("ok", "absent", "excluded")]
    status = "collected" if not problems else "partial"
    reason = "" if not problems else "%d of %d items not ok" % (len(problems), len(items))
    return {"status": status, "reason": reason, "items": items, "summary": result.get("summary") or {}}, files


def build(hosts, expected, secrets, stamp):
    """(manifest, {path in the archive: bytes}) of every host: the expected ones first, in their order."""
    order = list(expected) + sorted(h for h in hosts if h not in expected)
    manifest = {"format": MANIFEST_FORMAT, "generator": "ascend.vllm_pd.support_bundle", "created": stamp,
                "redaction": {"marker": MARK.decode(), "literal_values": len([s for s in secrets if s]),
                              "note": "secret values, PEM private keys, Authorization/Bearer headers, --api-key, "
                                      "*_TOKEN=, *_PASSWORD=, *_SECRET=, secret keys of JSON/YAML and URL passwords "
                                      "are replaced on the node and again here; secret files are never read"},
                "hosts": {}}
    members = {}
    for host in order:
        entry, files = host_entry(host, hosts.get(host), secrets)
        manifest["hosts"][host] = entry
        for name, data in files.items():
            members["%s/%s" % (host, name)] = data
    return manifest, members


def readme(manifest, archive_name):
    lines = ["A3 support bundle (ascend.vllm_pd, playbooks/collect.yml)", "",
             "Archive: %s" % archive_name, "Created: %s (UTC)" % manifest["created"], "",
             "Secrets are redacted (replaced by %s): %s." % (manifest["redaction"]["marker"], manifest["redaction"]["note"]),
             "manifest.json lists every host with each item collected: its source (command or file), status, exit",
             "code, error, size, whether only its tail was kept, and how many values were redacted.", "",
             "Hosts:"]
    for host, entry in manifest["hosts"].items():
        counts = {}
        for item in entry["items"]:
            counts[item["status"]] = counts.get(item["status"], 0) + 1
        said = ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items()))
        lines.append("  %-16s %-12s %s" % (host, entry["status"], "; ".join(x for x in (said, entry["reason"]) if x)))
        for item in entry["items"]:
            if item["status"] not in ("ok", "absent", "excluded"):
                lines.append("      %s: %s (%s)" % (item["name"], item["status"], item.get("error") or ""))
    lines += ["", "Layout: <host>/journal/, <host>/supervise/, <host>/npu/, <host>/hccn/, <host>/proxy/ (command",
              "answers; <name>.stderr beside one that wrote to stderr), <host>/files/<path on the node> (configs,",
              "the supervisor's records, the engine log's tail)."]
    return ("\n".join(lines) + "\n").encode("utf-8")


def archive_path(dest, now):
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    if dest.endswith(".tar.gz"):
        return dest, stamp
    return os.path.join(dest, "a3-support-%s.tar.gz" % stamp), stamp


def write_archive(path, stem, manifest, members, mtime):
    """The .tar.gz at path (mode 0600), written through a temporary file in the same directory."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".a3-support-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz") as tar:
                # the hosts in the inventory's order, as built
                entries = [("manifest.json", (json.dumps(manifest, indent=2) + "\n").encode("utf-8")),
                           ("README.txt", readme(manifest, os.path.basename(path)))]
                entries += sorted(members.items())
                for name, data in entries:
                    info = tarfile.TarInfo("%s/%s" % (stem, name))
                    info.size, info.mode, info.mtime = len(data), 0o600, mtime
                    tar.addfile(info, io.BytesIO(data))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def make_archive(params, check_mode, now=None):
    """(result, error): the archive of the params' hosts, written unless check_mode."""
    dest = params["dest"]
    if not dest or not os.path.isabs(dest):
        return None, "dest must be an absolute path (the directory of the archive), got %r" % (dest,)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    path, stamp = archive_path(dest, now)
    secrets = [s for s in params["secrets"] or [] if s]
    manifest, members = build(params["hosts"] or {}, params["expected_hosts"] or [], secrets,
                              now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    stem = os.path.basename(path)[:-len(".tar.gz")]
    if not check_mode:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_archive(path, stem, manifest, members, int(now.timestamp()))
    hosts = {h: "%s%s" % (e["status"], (": " + e["reason"]) if e["reason"] else "") for h, e in manifest["hosts"].items()}
    return {"changed": True, "path": path, "manifest": manifest, "hosts_status": hosts,
            "msg": ("would write %s" if check_mode else "wrote %s") % path}, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["collect", "archive"], default="collect"),
            commands=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                argv=dict(type="list", elements="str", required=True),
                timeout=dict(type="int"),
                stdin=dict(type="str", no_log=True),
            )),
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="str", required=True),
                max_bytes=dict(type="int"),
            )),
            exclude=dict(type="list", elements="str", default=[]),
            secrets=dict(type="list", elements="str", default=[], no_log=True),
            timeout=dict(type="int", default=30),
            deadline=dict(type="int", default=600),
            workers=dict(type="int", default=8),
            max_bytes=dict(type="int", default=1048576),
            max_files=dict(type="int", default=200),
            search_dirs=dict(type="list", elements="str",
                             default=["/usr/local/bin", "/usr/local/sbin", "/usr/local/Ascend/driver/tools", "/usr/bin",
                                      "/usr/sbin", "/bin", "/sbin"]),
            dest=dict(type="path"),
            hosts=dict(type="dict", default={}),
            expected_hosts=dict(type="list", elements="str", default=[]),
        ),
        required_if=[("state", "archive", ["dest"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "archive":
        try:
            result, error = make_archive(p, module.check_mode)
        except OSError as exc:
            module.fail_json(msg="cannot write the support archive under %s: %s" % (p["dest"], exc))
        if error:
            module.fail_json(msg=error)
        module.exit_json(**result)
    problems = _check_names(p["commands"] or [])
    problems += ["%s: not an absolute path" % f["path"] for f in p["files"] or [] if not os.path.isabs(f["path"])]
    problems += ["%s must be positive" % k for k in ("timeout", "deadline", "workers", "max_bytes", "max_files")
                 if p[k] < 1]
    if problems:
        module.fail_json(msg="support_bundle: " + "; ".join(problems))

    def which(program):
        if os.path.isabs(program):
            return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
        return module.get_bin_path(program, opt_dirs=p["search_dirs"])

    items, summary = collect(p, which, module.run_command)
    module.exit_json(changed=False, collected=items, summary=summary)


if __name__ == "__main__":
    main()
