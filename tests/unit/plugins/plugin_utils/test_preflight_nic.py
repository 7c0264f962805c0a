# -*- coding: utf-8 -*-
"""_preflight's NIC check: every address of the NIC and every NIC that has the business IP are named, in the order
ip printed them, in one whole message."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import judge_host_read

from test_preflight_host import NIC_TAIL, read, settings


def test_a_nic_with_other_addresses_and_the_ip_on_two_other_nics():
    addrs = ("2: eth0    inet 10.0.0.98/24 brd x scope global eth0\n"
             "2: eth0    inet6 fd00::98/64 scope global\n"
             "3: eth1    inet 10.0.0.11/24 brd x scope global eth1\n"
             "4: bond0    inet 10.0.0.11/24 brd x scope global bond0", 0)
    assert judge_host_read(read(addrs=addrs), settings())["problems"] == [
        "p0 [host/nic] the business IP 10.0.0.11 (a3_business_ip) is not configured on eth0 (a3_nic_name): eth0 has "
        "10.0.0.98, fd00::98; the IP is on eth1, bond0" + NIC_TAIL]
