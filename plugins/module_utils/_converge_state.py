# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the converge record (module converge_state, action plugin converge_state).

A converge that ends well writes a record on each node: the digest of the run's inputs (the collection's own
files, the inventory's values of every prefill/decode host, the controller files those values name) and a
fingerprint of what the roles left on the node (the content of every file they manage, the state of every unit
among them, the collection's containers and the image they run). A later run whose inputs have the same digest
and whose nodes all still show the recorded fingerprint has nothing to do: site.yml skips the roles there."""
from __future__ import annotations

import hashlib
import json
import os
import re

RECORD_VERSION = 1

# The collection's variables: every role default and inventory knob starts with one of these.
VARIABLE_RE = re.compile(r"^(a3|hugepages|container|patches|etcd|yuanrong|vllm|proxy|monitoring|gate|preflight"
                         r"|supervise|rolling)_")
# Not inputs: facts and results of the run itself, and the switches of the fast path (a run with
# -e a3_fast_path=false converges to the same state). ansible_host is one: the topology derives addresses from it.
NOT_INPUTS = frozenset(["a3_converge", "a3_fast_path_taken", "a3_managed_files", "a3_self", "a3_files_root",
                        "a3_files_host", "a3_fast_path", "a3_converge_record"])
INPUT_EXTRAS = ("ansible_host",)
# The parts of the collection a run executes.
COLLECTION_DIRS = ("roles", "plugins", "playbooks")
SYSTEMD_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


def digest(obj) -> str:
    """sha256 of the canonical JSON of obj (keys sorted; anything JSON cannot say is said by str())."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def file_sha(path, max_bytes=None):
    """sha256 of a file's content, or None when it is missing or unreadable. max_bytes: larger files are said by
    their size and modification time (the controller's big artifacts)."""
    try:
        st = os.stat(path)
        if max_bytes is not None and st.st_size > max_bytes:
            return "size:%d:mtime:%d" % (st.st_size, int(st.st_mtime))
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def tree_shas(root, subdirs=COLLECTION_DIRS, max_bytes=None) -> dict:
    """{relative path: sha} of every file under root/<subdir> (no byte code)."""
    out = {}
    for sub in subdirs:
        for top, dirs, files in os.walk(os.path.join(root, sub)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in files:
                if name.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(top, name)
                out[os.path.relpath(full, root)] = file_sha(full, max_bytes)
    return out


def input_variables(host_vars: dict) -> dict:
    """The values of one host that are inputs of the deployment: the collection's variables and ansible_host."""
    return {k: v for k, v in host_vars.items()
            if (VARIABLE_RE.match(k) or k in INPUT_EXTRAS) and k not in NOT_INPUTS}


def controller_paths(values: dict) -> list:
    """Controller paths named by variables whose name ends in _src or _src_dir (the patch directory): their
    content is an input too."""
    return sorted({v for k, v in values.items() if k.endswith(("_src", "_src_dir")) and isinstance(v, str) and v})


def whole_run(run_tags, skip_tags, limit) -> list:
    """Reasons a run is not a whole run of every node (an empty list: it is). Only a whole run compares with the
    record and writes it: a run with tags or a limit asked for its own part."""
    reasons = []
    if sorted(run_tags or ["all"]) != ["all"]:
        reasons.append("the run has --tags %s" % ",".join(run_tags))
    if skip_tags:
        reasons.append("the run has --skip-tags %s" % ",".join(skip_tags))
    if limit:
        reasons.append("the run has --limit %s" % limit)
    return reasons


def units_of(files) -> list:
    """systemd unit names among the managed files (their unit files live in a systemd directory)."""
    return sorted({os.path.basename(f) for f in files
                   if os.path.dirname(f) in SYSTEMD_DIRS and f.endswith((".service", ".timer"))})


def parse_systemctl_show(text: str) -> dict:
    """{Id: {property: value}} from `systemctl show -p Id,... unit...` (one block per unit, blank-line separated)."""
    out = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            out[props["Id"]] = props
    return out


def unit_states(units, shown: dict) -> dict:
    """What the record keeps of each unit: enabled or not, and running or not. A service its own timer starts
    is said by its enablement only: it runs a few seconds now and then, whenever the timer fires."""
    timers = {u[:-len(".timer")] for u in units if u.endswith(".timer")}
    out = {}
    for unit in units:
        props = shown.get(unit, {})
        enabled = props.get("UnitFileState", "missing") or "missing"
        if unit.endswith(".service") and unit[:-len(".service")] in timers:
            out[unit] = enabled
        else:
            out[unit] = "%s/%s" % (enabled, props.get("ActiveState", "missing") or "missing")
    return out


def parse_docker_inspect(text: str) -> dict:
    """{container name: {id, image, status}} from `docker inspect` JSON (an absent container is not in it)."""
    try:
        items = json.loads(text or "[]")
    except ValueError:
        return {}
    out = {}
    for item in items if isinstance(items, list) else []:
        name = str(item.get("Name", "")).lstrip("/")
        if name:
            out[name] = {"id": item.get("Id"), "image": item.get("Image"),
                         "status": (item.get("State") or {}).get("Status")}
    return out


def fingerprint(files: dict, units: dict, containers: dict, images: dict) -> dict:
    """The node's fingerprint: {path: sha or None}, {unit: state}, {name: {id, image, status} or None},
    {image reference: id or None}."""
    return {"files": dict(files), "units": dict(units), "containers": dict(containers), "images": dict(images)}


def make_record(input_digest: str, observed: dict) -> dict:
    return {"version": RECORD_VERSION, "digest": input_digest, "fingerprint": observed}


def _short(value):
    if isinstance(value, dict):
        return ",".join("%s=%s" % (k, _short(v)) for k, v in sorted(value.items()))
    if isinstance(value, str) and re.fullmatch(r"(sha256:)?[0-9a-f]{64}", value):
        return value.split(":")[-1][:12]
    return "missing" if value is None else str(value)


def differences(record, input_digest: str, observed: dict) -> list:
    """Why the node does not match its record (an empty list: it does). observed is the fingerprint read now
    for the record's own lists of files, units, containers and images."""
    if not record:
        return ["no record of a converge on this node"]
    if record.get("version") != RECORD_VERSION:
        return ["the record has version %s, this collection writes %s" % (record.get("version"), RECORD_VERSION)]
    reasons = []
    if record.get("digest") != input_digest:
        reasons.append("the inputs changed since the last converge (collection files, inventory values or "
                       "controller files): digest %s, recorded %s" % (input_digest[:12], str(record.get("digest"))[:12]))
    want = record.get("fingerprint") or {}
    for kind in ("files", "units", "containers", "images"):
        wanted, seen = want.get(kind) or {}, observed.get(kind) or {}
        for key in sorted(set(wanted) | set(seen)):
            if wanted.get(key) != seen.get(key):
                reasons.append("%s %s: %s, recorded %s" % (kind[:-1], key, _short(seen.get(key)), _short(wanted.get(key))))
    return reasons
