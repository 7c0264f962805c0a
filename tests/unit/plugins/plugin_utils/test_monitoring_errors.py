# -*- coding: utf-8 -*-
"""_monitoring.file_sd: each way a topology cannot give the scrape targets, with its whole message."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _monitoring as M

from test_monitoring import topology


@pytest.mark.parametrize("broken,port,message", [
    (lambda t: t.pop("hosts"), 8089, "the topology lacks 'hosts': pass the fact a3 of roles/common"),
    (lambda t: t.pop("etcd_members"), 8089, "the topology lacks 'etcd_members': pass the fact a3 of roles/common"),
    (lambda t: t["sides"].pop("decode"), 8089, "the topology lacks 'decode': pass the fact a3 of roles/common"),
    (lambda t: t.update(sides=None), 8089,
     "the topology lacks 'NoneType' object is not subscriptable: pass the fact a3 of roles/common"),
    (lambda t: t["etcd_members"].append({"host": "x9", "client_port": 2379}), 8089,
     "the etcd host 'x9' is not a host of the topology"),
    (lambda t: t.update(etcd_members=None), 8089, "the topology names no etcd member (etcd_members is None)"),
    (lambda t: t.update(etcd_members=[]), 8089, "the topology names no etcd member (etcd_members is [])"),
    (lambda t: t.update(proxy_hosts=["x8"]), 8089, "the proxy host 'x8' is not a host of the topology"),
    (lambda t: None, "eighty", "proxy_port 'eighty' is not a port number"),
    (lambda t: None, None, "proxy_port None is not a port number"),
])
def test_an_unusable_topology_is_one_error_saying_what(broken, port, message):
    topo = topology()
    broken(topo)
    with pytest.raises(M.MonitoringError) as err:
        M.file_sd(topo, port)
    assert str(err.value) == message
