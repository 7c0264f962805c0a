# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/monitoring.py, called through FilterModule().filters() as Ansible calls it:
the seed's file_sd target groups (the defaults of every optional argument), the dp sizes, the datasystem workers,
prom_sum, and a MonitoringError turned into one AnsibleFilterError with the same text."""
from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.monitoring import FilterModule  # noqa: E402
from helpers import FreshFilters  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import role_defaults  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import from_hostvars  # noqa: E402


FILTERS = FreshFilters(FilterModule)
IPS = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}


def seed():
    hostvars = {name: {"a3_business_ip": ip, "a3_nic_name": "bond0"} for name, ip in IPS.items()}
    return T.derive(from_hostvars(hostvars, {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}, role_defaults(),
                                  keys=T.TOPOLOGY_KEYS))


def vllm(host, ip, rank, side):
    return {"targets": ["%s:6700" % ip],
            "labels": {"component": "vllm", "side": side, "host": host, "instance": "%s:6700" % host,
                       "dp_rank": rank}}


def test_the_filters_are_registered_under_their_names():
    assert sorted(FILTERS) == ["monitoring_dp_sizes", "monitoring_ds_workers", "monitoring_file_sd", "prom_sum"]


def test_file_sd_of_the_seed_with_the_default_arguments():
    # no cluster label, the proxy's admin listener where the topology places it (proxy_admin_bind_host's default)
    assert FILTERS["monitoring_file_sd"](seed(), 8089) == {
        "vllm": [vllm("p0", "192.0.2.11", "0", "prefill"), vllm("p1", "192.0.2.12", "1", "prefill"),
                 vllm("d0", "192.0.2.13", "0", "decode"), vllm("d1", "192.0.2.14", "1", "decode")],
        "etcd": [{"targets": ["192.0.2.11:2379"],
                  "labels": {"component": "etcd", "side": "prefill", "host": "p0", "instance": "p0:2379"}}],
        "proxy": [{"targets": ["127.0.0.1:8089"],
                   "labels": {"component": "proxy", "side": "prefill", "host": "p0", "instance": "p0:8089"}}],
    }


def test_file_sd_has_one_proxy_target_per_proxy_host_from_its_own_values():
    hostvars = {name: {"a3_business_ip": ip, "a3_nic_name": "bond0", "a3_proxy_hosts": ["p1", "d0"]}
                for name, ip in IPS.items()}
    hostvars["p1"]["proxy_admin_bind_host"] = "0.0.0.0"
    hostvars["d0"].update(proxy_admin_bind_host="127.0.9.9", proxy_admin_port=9100)
    topo = T.derive(from_hostvars(hostvars, {"prefill": ["p0", "p1"], "decode": ["d0", "d1"]}, role_defaults(),
                                  keys=T.TOPOLOGY_KEYS))
    assert FILTERS["monitoring_file_sd"](topo, 8089)["proxy"] == [
        {"targets": ["192.0.2.12:8089"], "labels": {"component": "proxy", "side": "prefill", "host": "p1",
                                                    "instance": "p1:8089"}},
        {"targets": ["127.0.9.9:9100"], "labels": {"component": "proxy", "side": "decode", "host": "d0",
                                                   "instance": "d0:9100"}}]


def test_file_sd_of_a_topology_without_proxies_takes_the_arguments():
    topo = seed()
    del topo["proxies"], topo["proxy_hosts"]
    assert FILTERS["monitoring_file_sd"](topo, 8089)["proxy"][0]["targets"] == ["192.0.2.11:8089"]
    assert FILTERS["monitoring_file_sd"](topo, 9000, "", "127.0.0.1")["proxy"][0]["targets"] == ["127.0.0.1:9000"]


def test_file_sd_passes_cluster_and_proxy_address_on():
    sd = FILTERS["monitoring_file_sd"](seed(), 8089, "a3-prod", "127.0.0.1")
    assert sd["proxy"] == [{"targets": ["127.0.0.1:8089"],
                            "labels": {"component": "proxy", "side": "prefill", "host": "p0", "instance": "p0:8089",
                                       "cluster": "a3-prod"}}]


def test_an_unusable_topology_is_a_filter_error_with_the_same_text():
    topo = seed()
    topo["proxy_hosts"] = ["x9"]
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["monitoring_file_sd"](topo, 8089)
    assert err.value.message == "the proxy host 'x9' is not a host of the topology"


def test_dp_sizes_workers_and_prom_sum():
    topo = seed()
    assert FILTERS["monitoring_dp_sizes"](topo) == {"prefill": 2, "decode": 2}
    assert FILTERS["monitoring_ds_workers"](topo) == [
        {"host": "p0", "side": "prefill", "worker": "192.0.2.11:18481"},
        {"host": "p1", "side": "prefill", "worker": "192.0.2.12:18481"},
        {"host": "d0", "side": "decode", "worker": "192.0.2.13:18481"},
        {"host": "d1", "side": "decode", "worker": "192.0.2.14:18481"}]
    assert FILTERS["prom_sum"]('m{a="1"} 2\nm 3.5\n', "m") == 5.5
