# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

import shlex

from ansible.errors import AnsibleFilterError

# What the roles' "enable at boot" means: a unit whose [Install] section is linked. systemctl is-enabled also
# exits 0 for static, alias, indirect, generated and transient, but none of those starts the collection's units
# at boot (they all carry [Install] WantedBy=), so a unit in such a state is enabled again.
ENABLED_STATES = ("enabled", "enabled-runtime")


def _names(units, name):
    if isinstance(units, str):
        units = [units]
    if not isinstance(units, (list, tuple)) or not all(isinstance(u, str) and u for u in units):
        raise AnsibleFilterError("%s: the input must be a list of unit names, got %r" % (name, units))
    return list(units)


def unit_state_command(units):
    """One `unit <name> <is-active> <is-enabled>` line per unit; exit status 0 whatever the units' state."""
    return "; ".join(
        "printf 'unit %%s %%s %%s\\n' %s \"$(systemctl is-active %s 2>/dev/null)\" \"$(systemctl is-enabled %s 2>/dev/null)\""
        % ((shlex.quote(u),) * 3) for u in _names(units, "unit_state_command"))


def unit_states(lines, units=()):
    """Parse the lines unit_state_command printed into {unit: {active, enabled, active_state, enabled_state}}."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    if not isinstance(lines, (list, tuple)):
        raise AnsibleFilterError("unit_states: the input must be the read's stdout_lines, got %s" % type(lines).__name__)
    states = dict((u, {"active": False, "enabled": False, "active_state": "", "enabled_state": ""})
                  for u in _names(list(units), "unit_states"))
    for line in lines:
        fields = str(line).split()
        if len(fields) < 3 or fields[0] != "unit":
            continue
        active, enabled = fields[2], (fields[3] if len(fields) > 3 else "")
        states[fields[1]] = {"active": active == "active", "enabled": enabled in ENABLED_STATES,
                             "active_state": active, "enabled_state": enabled}
    return states


class FilterModule:
    def filters(self):
        return {"unit_state_command": unit_state_command, "unit_states": unit_states}
