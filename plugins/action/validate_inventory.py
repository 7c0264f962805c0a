# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: validate the whole inventory on the controller, without connecting to any node."""
from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import validate


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        allow = boolean(self._task.args.get("allow_placeholders", False), strict=False)
        # every option the roles' specs declare: what each host sets in the inventory, else the default of the
        # collection role that ships it
        # (raw: the untemplated values, for a value that names a role default the controller does not know)
        inventory = from_hostvars(task_vars["hostvars"], task_vars["groups"], role_defaults(),
                                  raw=getattr(task_vars["hostvars"], "raw_get", None))
        errors, warnings = validate(inventory, allow_placeholders=allow)
        result.update(changed=False, inventory_warnings=warnings)
        if warnings:
            result["warnings"] = list(warnings)
        if errors:
            result["failed"] = True
            result["msg"] = ("The inventory has %d problem(s); nothing was changed on any node:\n- %s"
                             % (len(errors), "\n- ".join(errors)))
        else:
            result["errors"] = []
            result["msg"] = "inventory is valid (%d warning(s))" % len(warnings)
        return result
