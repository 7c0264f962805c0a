# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_host
short_description: Every host judgement of the preflight on one node, from its one host read
description:
  - Takes the registered result of the preflight's host read and a dict of settings and returns the problems, the
    advisories and the versions found (see plugins/plugin_utils/_preflight.py).
  - The same file provides the parsers of that read, C(meminfo), C(sections), C(stat_types), C(cann_version) and
    C(port_hits), and C(reported_version) (the version a binary prints after a label, as the etcd and monitoring
    roles read it), see plugins/plugin_utils/_host.py.
positional: _input
options:
  _input:
    description: The registered result of the host read.
    type: dict
    required: true
  settings:
    description: The preflight's settings (limits, ports, what to check).
    type: dict
    required: true
"""

EXAMPLES = r"""
preflight_judged: "{{ preflight_read | ascend.vllm_pd.preflight_host(preflight_host_settings) }}"
"""

RETURN = r"""
_value:
  description: C({problems, advisories, versions}).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import (
    cann_version, parse_meminfo, parse_sections, parse_stat, port_hits, reported_version)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import judge_host_read


def preflight_host(result, settings):
    """The preflight's host judgments of one node: {problems, advisories, versions} (see _preflight.py)."""
    try:
        return judge_host_read(result, settings)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("preflight_host: %s" % exc)


class FilterModule:
    def filters(self):
        return {
            "meminfo": parse_meminfo,
            "sections": parse_sections,
            "stat_types": parse_stat,
            "cann_version": cann_version,
            "reported_version": reported_version,
            "port_hits": port_hits,
            "preflight_host": preflight_host,
        }
