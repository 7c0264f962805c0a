# -*- coding: utf-8 -*-
"""Render of etcd as a cluster (a3_etcd_hosts: three of the four hosts): every member's unit names itself and all
members, and every etcd client is given every member. The seed's single etcd is tests/golden/a3, unchanged."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from golden.conftest import render

WORK = "var/lib/ascend-vllm-pd"
IPS = {"p0": "127.0.43.1", "p1": "127.0.43.2", "d0": "127.0.44.1", "d1": "127.0.44.2"}
MEMBERS = ["p1", "d0", "p0"]   # not in inventory order: the list's order is the members' order
ENDPOINTS = ["127.0.43.2:2379", "127.0.44.1:2379", "127.0.43.1:2379"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    inv = tmp_path_factory.mktemp("inv-etcd")
    hosts = {side: {"hosts": {h: {"a3_business_ip": ip, "a3_nic_name": "bond0"}
                              for h, ip in IPS.items() if h[0] == side[0]}}
             for side in ("prefill", "decode")}
    hosts["all"] = {"vars": {"a3_etcd_hosts": MEMBERS}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    out = tmp_path_factory.mktemp("render-etcd")
    render(str(inv), out)
    return out


def exec_start(unit: Path) -> list:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def flags(argv: list) -> dict:
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


@pytest.mark.parametrize("host", MEMBERS)
def test_each_member_names_itself_and_the_whole_cluster(cluster, host):
    unit = cluster / host / "etc/systemd/system/ascend-etcd.service"
    argv = flags(exec_start(unit))
    ip = IPS[host]
    assert argv["--name"] == "etcd-" + host
    assert argv["--advertise-client-urls"] == "http://%s:2379" % ip
    assert argv["--initial-advertise-peer-urls"] == "http://%s:2380" % ip
    assert argv["--initial-cluster"] == ",".join("etcd-%s=http://%s:2380" % (m, IPS[m]) for m in MEMBERS)
    # the state (new or existing) comes from the member's environment file, written by tasks/join.yml
    assert "--initial-cluster-state" not in argv
    assert "EnvironmentFile=-/etc/ascend-etcd/member.env" in unit.read_text().splitlines()


def test_a_host_outside_the_list_runs_no_etcd(cluster):
    assert not (cluster / "d1/etc/systemd/system/ascend-etcd.service").exists()


@pytest.mark.parametrize("host", sorted(IPS))
def test_every_worker_is_given_every_member(cluster, host):
    script = (cluster / host / WORK / "run_yr_worker.sh").read_text()
    assert "--etcd_address %s " % ",".join(ENDPOINTS) in script
    unit = (cluster / host / "etc/systemd/system/ascend-yr-worker.service").read_text()
    assert "--tcp %s --what etcd" % ",".join(ENDPOINTS) in unit


def test_the_proxy_reads_every_member(cluster):
    script = (cluster / "p0" / WORK / "proxy.sh").read_text()
    assert "--a3-etcd %s" % ",".join(ENDPOINTS) in script.replace("'", "")


def test_prometheus_scrapes_every_member(cluster):
    groups = json.loads((cluster / "p0/etc/prometheus/file_sd/ascend-vllm-pd/etcd.json").read_text())
    assert [g["targets"] for g in groups] == [[e] for e in ENDPOINTS]
    assert [g["labels"]["host"] for g in groups] == MEMBERS
