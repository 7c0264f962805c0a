# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: topology
short_description: Derive the PD topology (dp ranks, addresses, ports, peers) from the inventory
description:
  - Reads the per-host variables of the C(prefill) and C(decode) groups (a variable a host does not set is the
    default of the collection role that ships it) and derives everything else once
    (the DP groups of each side (C(vllm_<side>_dp_groups), default one per side), each group's dp size, rank
    starts and dp address, etcd and proxy hosts, proxy backend lists, DS_WORKER_ADDR,
    kv port ranges, the Mooncake prefill/decode blocks).
  - The same file provides C(backends), every engine instance of the topology as one list (host, side, address, port).
positional: _input
options:
  _input:
    description: C(groups).
    type: dict
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
"""

EXAMPLES = r"""
# roles/common sets this fact once per host per run
a3: "{{ groups | ascend.vllm_pd.topology(hostvars) }}"
"""

RETURN = r"""
_value:
  description: Topology dict with keys C(sides), C(mooncake), C(hosts), C(etcd_host), C(etcd_address), C(proxy_host).
  type: dict
"""

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
