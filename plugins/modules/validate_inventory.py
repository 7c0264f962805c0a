# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: validate_inventory
short_description: Check the PD inventory on the controller before anything changes
description:
  - Reads every prefill/decode host's variables from C(hostvars) and reports all problems at once, each naming
    the host, the variable and what to set (placeholders, invalid or duplicate IPs, missing NIC names, empty
    groups, tp x dp_size_local above the NPUs per node, prefill tp below decode tp, overlapping port ranges,
    duplicate ports, non-unique lookup_rpc_port, hugepage target not a multiple of the page size).
  - Warns where the seed itself chose a risky value (kv ports inside Mooncake's random port band).
  - Runs on the controller only (action plugin); it never connects to a node.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  allow_placeholders:
    description:
      - Report placeholders (C(<...>)) as warnings instead of errors. The render playbook uses this so an
        unfilled inventory can still be reviewed.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Read-only.
  diff_mode:
    support: none
    description: Nothing to diff.
"""

EXAMPLES = r"""
- name: Validate the inventory
  ascend.vllm_pd.validate_inventory:
  run_once: true
"""

RETURN = r"""
errors:
  description: Every problem found (the message lists them when the task fails).
  returned: success
  type: list
  elements: str
inventory_warnings:
  description: Risky but accepted values.
  returned: always
  type: list
  elements: str
"""
