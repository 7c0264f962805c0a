# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    TOPOLOGY_KEYS, TopologyError, backends, derive)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults


def topology(groups, hostvars):
    try:
        # only what the derivation reads (the validation reads every option the specs declare, once, on the controller)
        return derive(from_hostvars(hostvars, groups, role_defaults(), keys=TOPOLOGY_KEYS))
    except (TopologyError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("cannot derive the topology (%s): run playbooks/validate.yml to see every "
                                 "inventory problem" % exc)


class FilterModule:
    def filters(self):
        return {
            "topology": topology,
            "backends": backends,
        }
