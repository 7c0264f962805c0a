# -*- coding: utf-8 -*-
"""After the failed preflight nothing may have changed on any node."""


def test_no_container_no_sysctl_no_etcd(host):
    assert host.run("docker ps -aq --filter name=yr_glm5").stdout.strip() == ""
    assert not host.file("/etc/sysctl.d/90-ascend-hugepages.conf").exists
    assert not host.file("/var/lib/ascend-vllm-pd").exists
    assert not host.file("/etc/systemd/system/ascend-etcd.service").exists
