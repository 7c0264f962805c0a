# -*- coding: utf-8 -*-
"""Issue 4, item 5: every injected fault gives its own preflight message naming the node and device,
the other nodes still pass, and nothing changes on any node. Runs on the fresh cluster of this
scenario (no deployment); each test injects one fault, runs playbooks/preflight.yml as an operator
would, and repairs the node in ``finally``."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import testinfra

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
NAMES = ("p0", "p1", "d0", "d1")
NODES = {n: testinfra.get_host("docker://a3sim-%s" % n) for n in NAMES}
CLUSTER = str(ROOT / "sim" / "cluster.sh")


def preflight(*args, **env):
    """(rc, output with every run of whitespace made one space: the callback folds long lines). Runs with the
    checkout's ansible.cfg, as an operator does (molecule points ANSIBLE_CONFIG at its own); ``args`` are
    extra ansible-playbook arguments (e.g. -e)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", **env)
    proc = subprocess.run(["ansible-playbook", "-i", "inventories/sim", "playbooks/preflight.yml", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    out = proc.stdout + proc.stderr
    changed = {h: int(c) for h, c in re.findall(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)}
    assert sorted(changed) == sorted(NAMES) and not any(changed.values()), "preflight changed something: %s" % changed
    return proc.returncode, " ".join(out.split())


def assert_only(out, node, problems):
    """``node`` reports ``problems`` problem(s); every other node passes."""
    assert "%s: %d problem(s)" % (node, problems) in out, out[-4000:]
    for other in NAMES:
        if other != node:
            assert "%s: OK" % other in out, (other, out[-4000:])


def fault(node, spec):
    subprocess.run([CLUSTER, "fault", node, json.dumps(spec) if spec != "clear" else spec], check=True,
                   capture_output=True, text=True)


FAULTS = [
    # (node, faults.json, what the message must say)
    ("d0", {"unhealthy_chips": [3]},
     r"d0 \[npu\] [^\n]*?only 15 of 16 chips report health OK, 16 required; phy-id 3 \(NPU \d+ chip \d+\) health is Alarm"),
    ("p1", {"vnic_down": [7]},
     r"p1 \[hccn\] 1 NPU network check\(s\) failed on 1 device\(s\) \[7\]: device 7 vnic: vnic link status DOWN"),
    ("d0", {"hccs_ping_fail": [2]},
     r"d0 \[hccn\] 3 NPU network check\(s\) failed on 1 device\(s\) \[2\]: device 2 hccs_ping: to p0 device 2 "
     r"\(127\.31\.0\.3\): 0 of 3 packets received .*?\[reproduce: \S*hccn_tool -i 2 -hccs_ping -g address 127\.31\.0\.3 cnt 3\]"),
    ("d1", {"tls_switch": {"4": 1}},
     r"d1 \[hccn\] 1 NPU network check\(s\) failed on 1 device\(s\) \[4\]: device 4 tls: tls switch 1, but the other "
     r"devices/nodes have 0 .*?\[reproduce: /\S*/hccn_tool -i 4 -tls -g \| grep switch\]"),
    # issue 13: a chip whose net health is Fault fails the preflight by default (it was advisory before)
    ("p0", {"net_health": {"9": "Fault"}},
     r"p0 \[hccn\] 1 NPU network check\(s\) failed on 1 device\(s\) \[9\]: device 9 net_health: net health status: "
     r"Fault \[reproduce: /\S*/hccn_tool -i 9 -net_health -g\]\. What to do: net_health: only Success and Init are healthy"
     r".*?set preflight_strict_net_health: false to make this advisory"),
]


@pytest.mark.parametrize("node,spec,message", FAULTS, ids=[next(iter(f[1])) for f in FAULTS])
def test_npu_fault_is_named(node, spec, message):
    fault(node, spec)
    try:
        rc, out = preflight()
    finally:
        fault(node, "clear")
    assert rc != 0
    assert re.search(message, out), out[-4000:]
    assert_only(out, node, 1)


def test_hccs_ping_unsupported_is_a_warning_not_a_failure():
    fault("d1", {"hccs_ping_unsupported": True})
    try:
        rc, out = preflight()
    finally:
        fault("d1", "clear")
    assert rc == 0, out[-4000:]
    assert re.search(r"d1 \[hccn\] hccs_ping unsupported on device\(s\) 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 \(advisory",
                     out), out[-4000:]
    assert not re.search(r"d1 \[hccn\] \d+ NPU network check", out)


def test_net_health_init_passes_and_a_fault_is_advisory_when_not_strict():
    # Init on every chip of d0 (what healthy HCCS-connected A3 chips read): no failure, no advisory
    fault("d0", {"net_health": {str(d): "Init" for d in range(16)}})
    try:
        rc, out = preflight()
    finally:
        fault("d0", "clear")
    assert rc == 0, out[-4000:]
    assert "net_health unhealthy" not in out and "net_health: net health status" not in out, out[-4000:]
    assert all("%s: OK" % name in out for name in NAMES), out[-4000:]
    # preflight_strict_net_health false: the same Fault as in FAULTS is an advisory, the run passes
    fault("p0", {"net_health": {"9": "Fault"}})
    try:
        rc, out = preflight("-e", '{"preflight_strict_net_health": false}')
    finally:
        fault("p0", "clear")
    assert rc == 0, out[-4000:]
    assert re.search(r"p0 \[hccn\] net_health unhealthy on device\(s\) 9 \(advisory; e\.g\. \S*hccn_tool -i 9 -net_health -g "
                     r"-> net health status: Fault\): advisory only because preflight_strict_net_health is false", out), \
        out[-4000:]
    assert not re.search(r"p0 \[hccn\] \d+ NPU network check", out)
    for name in NAMES:
        assert "%s: OK" % name in out, (name, out[-4000:])


def test_missing_hccn_conf_is_named():
    NODES["p1"].check_output("mv /etc/hccn.conf /etc/hccn.conf.preflight-test")
    try:
        rc, out = preflight()
    finally:
        NODES["p1"].check_output("mv /etc/hccn.conf.preflight-test /etc/hccn.conf")
    assert rc != 0
    assert "p1 [host/hccn.conf] /etc/hccn.conf is missing: the vLLM container mounts it" in out, out[-4000:]
    assert_only(out, "p1", 1)


LISTENER = ("import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind(('127.30.0.14', 18481)); s.listen(); time.sleep(300)")


def preflight_with_worker_port_held(name):
    """Run the preflight while a python process on d1 (its command line ending in ``name``) listens
    where d1's openYuanrong worker will (127.30.0.14:18481); (pid, rc, out)."""
    pid = NODES["d1"].check_output("nohup python3 -c %s %s >/dev/null 2>&1 & echo $!", LISTENER, name)
    try:
        NODES["d1"].check_output("for i in $(seq 50); do ss -Hltn | grep -q '127.30.0.14:18481 ' && exit 0; sleep 0.1; done; "
                                 "exit 1")
        return (pid,) + preflight()
    finally:
        NODES["d1"].run("kill %s", pid)


def test_port_in_use_by_another_process_is_named():
    pid, rc, out = preflight_with_worker_port_held("not-ours")
    assert rc != 0
    assert re.search(r"d1 \[host/ports\] port 18481, the openYuanrong worker port \(yuanrong_worker_port\), is already "
                     r"listened on at 127\.30\.0\.14 by python3 \(pid %s: python3 -c import socket" % pid, out), out[-4000:]
    assert "move yuanrong_worker_port to a free port" in out
    assert_only(out, "d1", 1)


def test_port_held_by_this_deployment_is_accepted():
    # a python process whose command line matches preflight_port_owner_cmdlines ('datasystem') is ours
    _unused, rc, out = preflight_with_worker_port_held("datasystem_worker")
    assert rc == 0, out[-4000:]
    assert "[host/ports]" not in out


def test_node_down_gives_one_message_per_phase_or_stops_the_run_unreachable():
    subprocess.run(["docker", "stop", "-t", "5", "a3sim-d1"], check=True, capture_output=True)
    try:
        # pipelined (the checkout's ansible.cfg): each module on d1 fails with the connection's error
        rc, out = preflight()
        # not pipelined, as over ssh to a down host: Ansible marks d1 UNREACHABLE and drops it from the play
        rc_unreachable, out_unreachable = preflight(ANSIBLE_PIPELINING="False")
    finally:
        subprocess.run([CLUSTER, "up"], check=True, capture_output=True, text=True, timeout=600)
    assert rc != 0
    assert_only(out, "d1", 3)
    for phase in ("npu", "hccn"):
        assert re.search(r"d1 \[%s\] [^\n]*?\(Error response from daemon: Container \w+ is not running\)" % phase, out), out[-4000:]
    assert re.search(r"d1 \[host\] the host read \(.*?\) did not run on this node \(Error response from daemon: "
                     r"Container \w+ is not running\): every host check needs it", out), out[-4000:]

    assert rc_unreachable != 0 and "UNREACHABLE" in out_unreachable
    assert "d1: NOT CHECKED (unreachable or failed" in out_unreachable, out_unreachable[-4000:]
    assert "preflight could not check d1 (unreachable or failed" in out_unreachable, out_unreachable[-4000:]
    assert all("%s: OK" % n in out_unreachable for n in ("p0", "p1", "d0")), out_unreachable[-4000:]


@pytest.mark.parametrize("name", NAMES)
def test_nothing_changed_on_the_node(name):
    node = NODES[name]
    assert node.run("docker ps -aq --filter name=yr_glm5").stdout.strip() == ""
    assert not node.file("/etc/sysctl.d/90-ascend-hugepages.conf").exists
    assert not node.file("/var/lib/ascend-vllm-pd").exists
    assert not node.file("/etc/systemd/system/ascend-etcd.service").exists
    assert not node.file("/etc/a3sim/faults.json").exists
    assert node.file("/etc/hccn.conf").size > 0
