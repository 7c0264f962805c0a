# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_file_sd
short_description: Prometheus file_sd target groups of the deployment, from the topology
description:
  - Turns the topology fact C(a3) (set by the role common) into Prometheus C(file_sd) target groups, one list per
    job - C(vllm) (every engine rank's API port, which serves C(/metrics)), C(etcd) (the etcd host's client port) and
    C(proxy) (the proxy's admin listener, served by a3_proxy.py).
  - Every group is labelled C(component), C(side), C(host), C(instance) (C(host:port)) and, for an engine rank,
    C(dp_rank); with I(cluster) set, C(cluster) as well.
  - The openYuanrong datasystem workers are left out - they write their observability data to log files and serve
    no metrics endpoint.
  - The same file provides C(monitoring_dp_sizes) (engine ranks per side) and C(monitoring_ds_workers) (every
    datasystem worker address with its host and side), see plugins/plugin_utils/_monitoring.py, and C(prom_sum) (a
    metric of a Prometheus text exposition summed over its label sets, see plugins/plugin_utils/_prom.py).
positional: _input
options:
  _input:
    description: The topology fact C(a3).
    type: dict
    required: true
  proxy_port:
    description: Port of the proxy's admin listener (C(proxy_admin_port)), which serves its C(/metrics).
    type: int
    required: true
  cluster:
    description: Value of the label C(cluster) on every target; empty adds no label.
    type: str
    default: ""
  proxy_address:
    description:
      - Address of the proxy's admin listener (C(proxy_admin_bind_host)); empty, C(0.0.0.0) or C(::) mean the proxy
        host's business IP.
    type: str
    default: ""
"""

EXAMPLES = r"""
# roles/monitoring writes one JSON file per job
content: "{{ (a3 | ascend.vllm_pd.monitoring_file_sd(proxy_admin_port, monitoring_cluster, proxy_admin_bind_host))['vllm'] | to_nice_json }}"
"""

RETURN = r"""
_value:
  description: C({job - [{targets - [ip:port], labels - {...}}]}) for the jobs C(vllm), C(etcd) and C(proxy).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._monitoring import (
    MonitoringError, dp_sizes, ds_workers, file_sd)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._prom import prom_sum


def monitoring_file_sd(topo, proxy_port, cluster="", proxy_address=""):
    try:
        return file_sd(topo, proxy_port, cluster, proxy_address)
    except MonitoringError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {
            "monitoring_file_sd": monitoring_file_sd,
            "monitoring_dp_sizes": dp_sizes,
            "monitoring_ds_workers": ds_workers,
            "prom_sum": prom_sum,
        }
