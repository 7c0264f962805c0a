# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: unit_state_command
short_description: Read systemd units' state inside a role's one read of its node, and parse what it printed
description:
  - The roles read a node in one shell round trip (versions, files, processes) and act only on what differs. These
    two filters are that read's systemd part, the same in every role (ansible-doc shows this page for both).
  - "C(unit_state_command): a shell fragment that prints one line per unit, C(unit <name> <active state>
    <unit file state>) (C(systemctl is-active) and C(systemctl is-enabled); the last field is empty for a unit
    systemd does not know). It never fails, so the read's other commands run too."
  - "C(unit_states): the lines of that read (other lines are ignored) parsed into C({name: {active, enabled,
    active_state, enabled_state}}). C(active) is true only for C(active) (not C(activating) or C(reloading));
    C(enabled) is true for C(enabled) and C(enabled-runtime). A unit of O(units) missing from the lines reads as
    inactive and disabled."
positional: _input
options:
  _input:
    description:
      - C(unit_state_command) takes a list of unit names (a single name is accepted).
      - C(unit_states) takes the read's C(stdout_lines) (or its C(stdout)).
    type: raw
    required: true
  units:
    description:
      - C(unit_states) only. Names that must be in the result even when the lines do not mention them.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the node
  ansible.builtin.shell:
    cmd: "stat -c %s /var/log/x.log; {{ ['vllm.service', 'canary.timer'] | ascend.vllm_pd.unit_state_command }}"
  register: read

- name: Start the unit when it is not active
  ansible.builtin.debug:
    msg: start
  when: not (read.stdout_lines | ascend.vllm_pd.unit_states)['vllm.service'].active
"""

RETURN = r"""
_value:
  description:
    - C(unit_state_command) a shell fragment (string).
    - "C(unit_states) a dict C({unit: {active, enabled, active_state, enabled_state}})."
  type: raw
"""

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
