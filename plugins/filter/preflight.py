# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

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
