#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: converge_state
short_description: Compare a node with the record of its last converge, or write that record
description:
  - With O(state=compare), reads the record of the node's last converge (O(path)) and the node's state now, in
    one call, namely the content of each file the record lists (its patterns expanded again, so a new file counts), the
    state of each systemd unit among those files, the containers whose name is O(container_prefix) or starts
    with it followed by C(_), and the id of each image of the record. Returns RV(in_sync) and, when the node
    differs, RV(reasons). Only reads.
  - With O(state=record), reads the same state for O(files), O(container_prefix) and O(images) and writes it
    with O(digest) to O(path) (changed only when the record's content changes).
  - The action plugin computes O(digest) on the controller when it is not given (the digest of the run's
    inputs; see the C(converge_state) action plugin).
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  state:
    description: Compare with the record, or write it.
    type: str
    choices: [compare, record]
    default: compare
  path:
    description: The record's path on the node.
    type: path
    required: true
  digest:
    description: Digest of the run's inputs (given by the action plugin).
    type: str
    required: true
  files:
    description: Paths or glob patterns of the files to record (O(state=record)).
    type: list
    elements: str
    default: []
  container_prefix:
    description: Name of the collection's container; C(<name>_*) containers are recorded with it (O(state=record)).
    type: str
    default: ""
  images:
    description: Image references whose id is recorded (O(state=record)).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: O(state=compare) only reads; O(state=record) reports whether the record would change.
  diff_mode:
    support: none
    description: No diff.
"""

EXAMPLES = r"""
- name: Compare the node with its last converge
  ascend.vllm_pd.converge_state:
    path: /var/lib/ascend-vllm-pd/converge.json
  register: a3_converge
"""

RETURN = r"""
in_sync:
  description: The inputs' digest and the node's state both match the record.
  returned: always
  type: bool
reasons:
  description: What differs, one line each (empty when in sync).
  returned: always
  type: list
  elements: str
digest:
  description: The digest of the run's inputs.
  returned: always
  type: str
"""

import glob
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._converge_state import (
    differences, file_sha, fingerprint, make_record, parse_docker_inspect, parse_systemctl_show, unit_states, units_of)


def observe(module, patterns, prefix, images):
    """The node's fingerprint for these file patterns, the containers of this prefix and these images."""
    files = {}
    for pattern in patterns:
        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        for path in found:
            files[path] = file_sha(path)
    units = units_of(files)
    shown = {}
    if units:
        _rc, out, _err = module.run_command(["systemctl", "show", "-p", "Id,ActiveState,UnitFileState", "--"] + units)
        shown = parse_systemctl_show(out)
    containers, image_ids = {}, {}
    docker = module.get_bin_path("docker")
    if prefix and docker:
        _rc, out, _err = module.run_command([docker, "ps", "-a", "--format", "{{.Names}}"])
        names = sorted(n for n in out.split() if n == prefix or n.startswith(prefix + "_"))
        if names:
            _rc, out, _err = module.run_command([docker, "inspect", "--type", "container"] + names)
            containers = parse_docker_inspect(out)
    for ref in images:
        rc, out, _err = module.run_command([docker, "image", "inspect", "-f", "{{.Id}}", ref]) if docker else (1, "", "")
        image_ids[ref] = out.strip() if rc == 0 else None
    return fingerprint(files, unit_states(units, shown), containers, image_ids)


def read_record(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["compare", "record"], "default": "compare"},
            "path": {"type": "path", "required": True},
            "digest": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "str", "default": []},
            "container_prefix": {"type": "str", "default": ""},
            "images": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "compare":
        record = read_record(p["path"])
        sources = (record or {}).get("sources") or {}
        observed = observe(module, sources.get("files", []), sources.get("container_prefix", ""),
                           sources.get("images", [])) if record else {}
        reasons = differences(record, p["digest"], observed)
        module.exit_json(changed=False, in_sync=not reasons, reasons=reasons, digest=p["digest"])

    observed = observe(module, p["files"], p["container_prefix"], p["images"])
    record = make_record(p["digest"], observed)
    record["sources"] = {"files": sorted(set(p["files"])), "container_prefix": p["container_prefix"],
                         "images": p["images"]}
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    try:
        with open(p["path"], encoding="utf-8") as fh:
            changed = fh.read() != text
    except OSError:
        changed = True
    if changed and not module.check_mode:
        directory = os.path.dirname(p["path"])
        os.makedirs(directory, mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".converge.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p["path"])
    module.exit_json(changed=changed, in_sync=True, reasons=[], digest=p["digest"])


if __name__ == "__main__":
    main()
