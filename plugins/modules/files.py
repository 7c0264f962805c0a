#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: files
short_description: Write a set of files in one call, changing only those that differ
description:
  - Writes every file of O(files) whose content or mode differs from the node's, creating missing parent
    directories, in one module call (a template or copy task costs two per file).
  - The action plugin renders O(files[].template) from the role's C(templates/) with the task's variables (as
    M(ansible.builtin.template) does, C(ansible_managed) included), reads O(files[].src) from the role's
    C(files/), and sends the contents; the module reads the node's files, plans and writes each changed file
    through a temporary file in its directory and C(atomic_move) (an existing file keeps its owner and SELinux
    context, as with M(ansible.builtin.template)).
  - A path that exists as a directory or anything but a regular file fails the task, naming it.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  files:
    description: The files.
    type: list
    elements: dict
    required: true
    suboptions:
      dest:
        description: Path on the node (after O(root)).
        type: str
        required: true
      template:
        description: Template in the role's C(templates/), rendered on the controller.
        type: str
      src:
        description: File in the role's C(files/), copied as is.
        type: str
      content:
        description: The content itself.
        type: str
      mode:
        description: Permissions, an octal string such as C("0644").
        type: str
        required: true
      validate:
        description:
          - Command run on the new content before it replaces the file, C(%s) standing for a temporary file in the
            same directory (like the template module's O(ansible.builtin.template#module:validate)). A non-zero
            exit keeps the old file and fails the task with the command's output. Not run in check mode.
        type: str
  directories:
    description: Directories that must exist even when no file of O(files) is in them.
    type: list
    elements: str
    default: []
  directory_mode:
    description: Mode of the directories it creates.
    type: str
    default: "0755"
  root:
    description: Prefix of every path (render mode writes under C(render_dir/<host>)).
    type: str
    default: ""
  units:
    description:
      - systemd units to enable at boot (and, with O(units[].started), start) once the files are written, after a
        C(systemctl daemon-reload) when a written file under a systemd unit directory changed. A unit already
        enabled (and active) gets no call. Nothing is stopped, disabled or restarted (the roles' handlers restart).
      - Ignored with O(root) (render mode writes on the controller and touches no unit).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The unit, e.g. C(yr-worker.service).
        type: str
        required: true
      enabled:
        description: Enabled at boot.
        type: bool
        default: true
      started:
        description: Started when it is not active (a timer; a service's start belongs to the role's handler).
        type: bool
        default: false
attributes:
  check_mode:
    support: full
    description: Reports what would change and writes nothing.
  diff_mode:
    support: full
    description: A before/after entry per changed file (contents over 64 KiB or binary show as a size).
"""

EXAMPLES = r"""
- name: Write the worker scripts and its systemd unit
  ascend.vllm_pd.files:
    files:
      - {template: run_yr_worker.sh.j2, dest: /root/glm5/run_yr_worker.sh, mode: "0755"}
      - {src: a3_supervise.py, dest: /usr/local/libexec/ascend-vllm-pd/a3_supervise.py, mode: "0755"}
      - {content: "vm.nr_hugepages=2048\n", dest: /etc/sysctl.d/90-hugepages.conf, mode: "0644"}
      - {template: prometheus.yml.j2, dest: /etc/prometheus/prometheus.yml, mode: "0644",
         validate: "/usr/local/bin/promtool check config %s"}
  register: written
"""

RETURN = r"""
changed_paths:
  description: Paths (without O(root)) whose content or mode changed (or would, in check mode).
  returned: always
  type: list
  elements: str
created_dirs:
  description: Directories (with O(root)) that were created (or would be).
  returned: always
  type: list
  elements: str
daemon_reloaded:
  description: Whether systemd reloaded its units (or would have).
  returned: always
  type: bool
unit_actions:
  description: The systemctl calls made (or that would be), e.g. C([enable, yr-worker.service]).
  returned: always
  type: list
  elements: list
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import (
    apply, command_validator, needs_daemon_reload, parse_mode, unit_actions)


def systemctl(module, *args):
    """Run systemctl; a failure fails the task with its output."""
    rc, out, err = module.run_command([module.get_bin_path("systemctl", required=True)] + list(args))
    if rc != 0:
        module.fail_json(msg="systemctl %s failed (rc %d): %s" % (" ".join(args), rc, (err or out).strip()))
    return out


def unit_state(module, name):
    """The words of systemctl is-enabled and is-active (either exits non-zero for a disabled or inactive unit)."""
    cmd = module.get_bin_path("systemctl", required=True)
    return {"enabled": module.run_command([cmd, "is-enabled", name])[1].strip(),
            "active": module.run_command([cmd, "is-active", name])[1].strip()}


def main():
    def run(argv):
        rc, out, err = module.run_command(argv)
        return rc, out + err

    def move(tmp, path):
        # atomic_move keeps the old file's owner and SELinux context, and copies within the directory when a rename
        # is refused; a failure of that copy is a bare Exception (its cause chained), which fails the task naming
        # both, as an OSError does
        try:
            module.atomic_move(tmp, path)
        except OSError:
            raise
        except Exception as e:  # pylint: disable=broad-exception-caught
            cause = getattr(e, "__cause__", None)
            raise OSError("%s (%s)" % (e, cause) if cause is not None else str(e)) from e

    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "required": True, "options": {
                "dest": {"type": "str", "required": True},
                "template": {"type": "str"},
                "src": {"type": "str"},
                "content": {"type": "str"},
                "mode": {"type": "str", "required": True},
                "validate": {"type": "str"},
            }},
            "directories": {"type": "list", "elements": "str", "default": []},
            "directory_mode": {"type": "str", "default": "0755"},
            "root": {"type": "str", "default": ""},
            "units": {"type": "list", "elements": "dict", "default": [], "options": {
                "name": {"type": "str", "required": True},
                "enabled": {"type": "bool", "default": True},
                "started": {"type": "bool", "default": False},
            }},
        },
        supports_check_mode=True,
    )
    root = module.params["root"].rstrip("/")
    files = []
    try:
        for f in module.params["files"]:
            if f.get("content") is None:
                module.fail_json(msg="%s: no content; template and src are read by the action plugin "
                                     "(ascend.vllm_pd.files), which sends the content" % f["dest"])
            try:
                mode = parse_mode(f["mode"])
            except ValueError as e:
                module.fail_json(msg="%s: %s" % (f["dest"], e))
            entry = {"path": root + f["dest"], "dest": f["dest"], "mode": mode,
                     "content": f["content"].encode("utf-8", "surrogateescape")}
            if f.get("validate"):
                entry["validate"] = command_validator(f["dest"], f["validate"], run)
            files.append(entry)
        result = apply(files, [root + d for d in module.params["directories"]],
                       parse_mode(module.params["directory_mode"]), module.check_mode, module._diff, move)
    except (ValueError, OSError) as e:
        module.fail_json(msg=str(e))
    result["changed_paths"] = [p[len(root):] for p in result["changed_paths"]]
    result["daemon_reloaded"], result["unit_actions"] = False, []
    if module.params["units"] and not root:
        if needs_daemon_reload(result["changed_paths"]):
            result["daemon_reloaded"] = True
            if not module.check_mode:
                systemctl(module, "daemon-reload")
        units = module.params["units"]
        result["unit_actions"] = unit_actions(units, {u["name"]: unit_state(module, u["name"]) for u in units})
        for action in result["unit_actions"]:
            if not module.check_mode:
                systemctl(module, *action)
        result["changed"] = result["changed"] or bool(result["unit_actions"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
