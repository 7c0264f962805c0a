# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared attribute documentation of the collection's read-only node modules (hccn_check, npu_smi_info)."""

from __future__ import annotations


class ModuleDocFragment(object):

    # ascend.vllm_pd.attributes: a module that only reads the node
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in diff mode).
    support: none
  idempotent:
    description: The module only reads; running it again on an unchanged node gives the same result.
    support: full
"""

    # ascend.vllm_pd.attributes.facts: it also returns facts
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""
