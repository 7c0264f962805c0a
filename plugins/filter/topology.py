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
  - The same file provides C(size_gib), C(size_mib), C(size_bytes), C(meminfo), C(sections), C(stat_types),
    C(cann_version) and C(port_hits) (the preflight's host read, see plugins/plugin_utils/_host.py), C(reported_version)
    (the version a binary prints after a label, as the etcd and monitoring roles read it), C(preflight_host)
    (every host judgement of the preflight on one node, from the registered host read and a dict of settings, see
    plugins/plugin_utils/_preflight.py), C(serve_lines), C(shell_dq), C(launcher_argv), C(engine_processes),
    C(engine_env) (vllm_env_common, then vllm_<side>_env, then vllm_env_extra) and C(valued_flags) (a dict of flags
    and values as the list C(--flag value ...), booleans as true or false), see plugins/plugin_utils/_render.py.
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

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import (
    cann_version, parse_meminfo, parse_sections, parse_stat, port_hits, reported_version)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import judge_host_read
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._prom import prom_sum
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import (
    engine_env, engine_processes, launcher_argv, serve_lines, shell_dq, valued_flags)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    TOPOLOGY_KEYS, TopologyError, backends, derive, docker_size, parse_size, size_gib, size_mib)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults


def topology(groups, hostvars):
    try:
        # only what the derivation reads (validation reads every HOST_KEY, once, on the controller)
        return derive(from_hostvars(hostvars, groups, role_defaults(), keys=TOPOLOGY_KEYS))
    except (TopologyError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("cannot derive the topology (%s): run playbooks/validate.yml to see every "
                                 "inventory problem" % exc)


def _size(func, value):
    try:
        return func(value)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def preflight_host(result, settings):
    """The preflight's host judgments of one node: {problems, advisories, versions} (see _preflight.py)."""
    try:
        return judge_host_read(result, settings)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("preflight_host: %s" % exc)


class FilterModule:
    def filters(self):
        return {
            "topology": topology,
            "size_gib": lambda v: _size(size_gib, v),
            "docker_size": lambda v: _size(docker_size, v),
            "size_mib": lambda v: _size(size_mib, v),
            "size_bytes": lambda v: _size(parse_size, v),
            "meminfo": parse_meminfo,
            "sections": parse_sections,
            "stat_types": parse_stat,
            "cann_version": cann_version,
            "reported_version": reported_version,
            "port_hits": port_hits,
            "preflight_host": preflight_host,
            "backends": backends,
            "prom_sum": prom_sum,
            "serve_lines": serve_lines,
            "shell_dq": shell_dq,
            "launcher_argv": launcher_argv,
            "engine_processes": engine_processes,
            "engine_env": engine_env,
            "valued_flags": valued_flags,
        }
