# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ascend.vllm_pd.files: render the templates and read the role files on the controller, then
write them all on the node with one module call (see plugins/modules/files.py)."""
from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

# Only public interfaces of ansible-core (meta/runtime.yml: 2.19): ansible.template's generate_ansible_template_vars
# (marked there for a deprecation in 2.23, collections then to set these variables themselves) and trust_as_template
# (2.19 renders only text marked trusted; a template file of the role is).
from ansible.template import generate_ansible_template_vars, trust_as_template


def _template_vars(src, fullpath, dest, managed):
    """The variables ansible.builtin.template adds (template_path, template_destpath, ...), and ansible_managed
    unless the site sets its own (``managed`` false)."""
    out = generate_ansible_template_vars(src, fullpath=fullpath, dest_path=dest)
    return out if managed else {k: v for k, v in out.items() if k != "ansible_managed"}


SOURCES = ("template", "src", "content")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _render(self, name, dest, task_vars):
        """A template of the role, rendered as ansible.builtin.template does (its search path, its template
        variables, trim_blocks)."""
        try:
            source = self._find_needle("templates", name)
        except AnsibleError as e:
            raise AnsibleActionFail(to_text(e))
        searchpath = []
        for p in list(task_vars.get("ansible_search_path", [])) + [self._loader.get_basedir(), os.path.dirname(source)]:
            searchpath.extend([os.path.join(p, "templates"), p])
        tvars = dict(task_vars)
        # the site's own ansible_managed wins, as with the template module
        tvars.update(_template_vars(name, source, dest, "ansible_managed" not in tvars))
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=tvars)
        out = templar.template(trust_as_template(self._loader.get_text_file_contents(source)),
                               escape_backslashes=False,
                               overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence="\n"))
        return "" if out is None else to_text(out)

    def _read(self, name):
        try:
            source = self._find_needle("files", name)
        except AnsibleError as e:
            raise AnsibleActionFail(to_text(e))
        with open(source, "rb") as fh:
            return fh.read().decode("utf-8", "surrogateescape")

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        files = args.get("files")
        if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
            raise AnsibleActionFail("files must be a list of dicts (dest, mode and one of template, src, content)")
        sent = []
        for f in files:
            given = [k for k in SOURCES if f.get(k) is not None]
            if "dest" not in f or "mode" not in f or len(given) != 1:
                raise AnsibleActionFail("each file needs dest, mode and exactly one of %s; got %s"
                                        % (", ".join(SOURCES), ", ".join(sorted(f)) or "nothing"))
            if given[0] == "template":
                content = self._render(f["template"], args.get("root", "") + f["dest"], task_vars)
            elif given[0] == "src":
                content = self._read(f["src"])
            else:
                content = to_text(f["content"])
            entry = {"dest": f["dest"], "mode": str(f["mode"]), "content": content}
            if f.get("validate"):
                entry["validate"] = f["validate"]
            sent.append(entry)
        module_args = {k: v for k, v in args.items() if k != "files"}
        module_args["files"] = sent
        result.update(self._execute_module(module_name="ascend.vllm_pd.files", module_args=module_args,
                                           task_vars=task_vars))
        if not args.get("root") and not result.get("failed"):
            # every file the roles manage on the node, for the record of the converge (converge_state)
            managed = set((task_vars.get("ansible_facts") or {}).get("a3_managed_files") or []) | {f["dest"] for f in sent}
            result.setdefault("ansible_facts", {})["a3_managed_files"] = sorted(managed)
        return result
