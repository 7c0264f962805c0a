# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

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
