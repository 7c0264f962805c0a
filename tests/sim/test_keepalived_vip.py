# -*- coding: utf-8 -*-
"""The proxy role's keepalived configuration (roles/proxy/templates/keepalived.conf.j2, proxy_vip) run by the real
keepalived in two network namespaces this test makes, each a proxy host with a stand-in edge on port 8088: exactly
one of them holds the address; an edge that answers 503 keeps it; an edge that stops answering, or a host cut off
from the network, gives it to the other within a bound (measured and printed); the host that comes back does not
take it over again (nopreempt). Clients on this machine reach the address over a test bridge. Needs root,
iproute2, iptables and keepalived (sim/cluster.sh deps installs it); the addresses are 127.31.0.0/24 (loopback
addresses routed over the bridge: route_localnet)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import ROOT, render_role_vars  # noqa: E402

BRIDGE, NS, VETH = "a3vip-br", ("a3vip-p0", "a3vip-p1"), ("a3vip-v0", "a3vip-v1")
HOST_IP, IPS, VIP = "127.31.0.1", ("127.31.0.11", "127.31.0.12"), "127.31.0.10"
NET = "127.31.0.0/24"
FORWARD_RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"]
# takeover bounds: the holder's adverts stop (3 x advert_int + skew, then gratuitous ARP), or its edge check fails
# (fall x interval + timeout) and it gives up the address
BOUND_CUT, BOUND_EDGE = 8.0, 12.0

# A stand-in edge: answers GET with its name, status from argv (200, or 503 like a proxy without backends).
EDGE = r'''
import http.server, sys
name, status = sys.argv[1], int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = name.encode()
        self.send_response(status); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8088), H).serve_forever()
'''


def run(*argv, check=True):
    out = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(argv), out.stderr or out.stdout))
    return out


def in_ns(index, *argv, check=True):
    return run("ip", "netns", "exec", NS[index], *argv, check=check)


@pytest.fixture(scope="module")
def network():
    """Two namespaces on a bridge; each node's eth0 holds its address, and 127.31.0.0/24 is routed over the
    bridge (a more specific route than lo's 127.0.0.0/8 in the local table), here and in each namespace."""
    for tool in ("ip", "iptables", "keepalived"):
        if not shutil.which(tool):
            pytest.fail("%s is missing: sim/cluster.sh deps installs it" % tool, pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("the virtual-IP test makes network namespaces: run it as root (CI does)", pytrace=False)
    cleanup()
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "link", "set", BRIDGE, "up")
    run("ip", "addr", "add", HOST_IP + "/24", "dev", BRIDGE)
    run("sysctl", "-qw", "net.ipv4.conf.%s.route_localnet=1" % BRIDGE)
    run("ip", "route", "replace", NET, "dev", BRIDGE, "table", "local", "src", HOST_IP)
    run("iptables", "-I", *FORWARD_RULE)   # this machine's FORWARD policy may drop bridged packets (br_netfilter)
    for i, ip in enumerate(IPS):
        run("ip", "netns", "add", NS[i])
        run("ip", "link", "add", VETH[i], "type", "veth", "peer", "name", "eth0", "netns", NS[i])
        run("ip", "link", "set", VETH[i], "master", BRIDGE, "up")
        in_ns(i, "ip", "link", "set", "lo", "up")
        in_ns(i, "ip", "link", "set", "eth0", "up")
        in_ns(i, "ip", "addr", "add", ip + "/24", "dev", "eth0")
        in_ns(i, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf.eth0.route_localnet=1")
        in_ns(i, "ip", "route", "replace", NET, "dev", "eth0", "table", "local", "src", ip)
    yield
    cleanup()


def cleanup():
    for ns in NS:
        run("ip", "netns", "pids", ns, check=False)
        for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)   # the keepalived and edge processes this test started there
            except ProcessLookupError:
                pass
        run("ip", "netns", "del", ns, check=False)
    run("ip", "link", "del", BRIDGE, check=False)
    run("ip", "route", "del", NET, "dev", BRIDGE, "table", "local", check=False)
    while run("iptables", "-D", *FORWARD_RULE, check=False).returncode == 0:
        pass


def configs():
    """The role's keepalived.conf for each proxy host (p0, p1), as the role renders it."""
    template = (ROOT / "roles/proxy/templates/keepalived.conf.j2").read_text()
    a3 = {"proxy_hosts": ["p0", "p1"], "proxies": [{"host": "p%d" % i, "ip": ip} for i, ip in enumerate(IPS)],
          "hosts": {"p%d" % i: {"business_ip": ip} for i, ip in enumerate(IPS)}}
    cases = [{"a3": a3, "inventory_hostname": "p%d" % i, "a3_nic_name": "eth0", "proxy_vip": VIP,
              "proxy_vrrp_password": "a3-test", "_template": template} for i in range(2)]
    files = ("roles/common/defaults/main.yml", "roles/proxy/defaults/main.yml", "roles/proxy/vars/main.yml")
    return [r[0] for r in render_role_vars(files, cases, ["_template"])]


class Node:
    def __init__(self, index, tmp: Path, config: str):
        self.index, self.tmp = index, tmp
        self.conf = tmp / ("keepalived-p%d.conf" % index)
        self.conf.write_text(config)
        self.conf.chmod(0o600)
        self.keepalived = self.edge = None

    def start_edge(self, status=200):
        self.stop_edge()
        self.edge = subprocess.Popen(["ip", "netns", "exec", NS[self.index], sys.executable, "-c", EDGE,
                                      "p%d" % self.index, str(status)])

    def stop_edge(self):
        if self.edge:
            self.edge.kill()
            self.edge.wait()
            self.edge = None

    def _pid(self, name):
        return str(self.tmp / ("%s-p%d.pid" % (name, self.index)))

    def start_keepalived(self):
        pid = self._pid
        self.keepalived = subprocess.Popen(
            ["ip", "netns", "exec", NS[self.index], "keepalived", "--dont-fork", "--log-console", "--vrrp",
             "-f", str(self.conf), "-p", pid("keepalived"), "-r", pid("vrrp"), "-c", pid("checkers")],
            stdout=open(self.tmp / ("keepalived-p%d.log" % self.index), "w"), stderr=subprocess.STDOUT)

    def holds_vip(self):
        return (" %s/" % VIP) in in_ns(self.index, "ip", "-o", "addr", "show", "dev", "eth0").stdout

    def link(self, up):
        run("ip", "link", "set", VETH[self.index], "up" if up else "down")

    def stop(self):
        self.stop_edge()
        if self.keepalived:
            self.keepalived.terminate()
            try:
                self.keepalived.wait(10)
            except subprocess.TimeoutExpired:
                self.keepalived.kill()


def through_vip(timeout=1.0):
    """(status, name of the answering edge) of GET http://VIP:8088/healthcheck from this machine, or (None, error)."""
    try:
        with urllib.request.urlopen("http://%s:8088/healthcheck" % VIP, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return None, str(err)


def holder(nodes):
    """(the node that holds the address, the other) once the address answers (at most 20 s): exactly one holds it."""
    end = time.monotonic() + 20
    while through_vip(0.5)[0] is None:
        assert time.monotonic() < end, "nobody answers on the virtual IP: %s" % (through_vip(),)
        time.sleep(0.2)
    held = [n for n in nodes if n.holds_vip()]
    assert len(held) == 1 and through_vip()[1] == "p%d" % held[0].index, (held, through_vip())
    return held[0], nodes[1 - held[0].index]


def wait_for(name, bound):
    """Seconds until the address answers with edge name (any status), or None after bound seconds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound:
        if through_vip(0.5)[1] == name:
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def edge_answers(index):
    return in_ns(index, "curl", "-s", "-o", "/dev/null", "-m", "1", "http://%s:8088/" % IPS[index],
                 check=False).returncode == 0


@pytest.fixture()
def nodes(network, tmp_path):
    made = [Node(i, tmp_path, text) for i, text in enumerate(configs())]
    for node in made:
        node.start_edge()
    end = time.monotonic() + 15
    while not all(edge_answers(i) for i in range(2)):
        assert time.monotonic() < end, "the stand-in edges did not start"
        time.sleep(0.2)
    for node in made:
        node.start_keepalived()
    yield made
    for node in made:
        node.stop()
        node.link(True)
    for node in made:   # keepalived removes the address when it stops; what a kill leaves, remove
        in_ns(node.index, "ip", "addr", "del", VIP + "/32", "dev", "eth0", check=False)
    for node in made:
        print("---- keepalived p%d\n%s" % (node.index, (tmp_path / ("keepalived-p%d.log" % node.index)).read_text()[-1500:]))


def test_one_host_holds_the_address_and_an_edge_answering_503_keeps_it(nodes):
    first, other = holder(nodes)
    first.start_edge(status=503)   # no backend in rotation: the edge answers honestly, the address stays
    time.sleep(8)   # longer than fall x interval
    assert through_vip() == (503, "p%d" % first.index) and first.holds_vip() and not other.holds_vip()


def test_a_host_cut_off_loses_the_address_within_the_bound_and_does_not_take_it_back(nodes):
    first, other = holder(nodes)
    first.link(False)   # the holder lost: its adverts stop reaching the other
    moved = wait_for("p%d" % other.index, BOUND_CUT)
    print("\nvirtual IP answered by the other host %.1f s after the holder was cut off" % (moved or -1))
    assert moved is not None, through_vip()
    assert other.holds_vip()
    first.link(True)   # back: nopreempt, the other keeps the address (the first drops its copy on its adverts)
    time.sleep(6)
    assert through_vip()[1] == "p%d" % other.index and other.holds_vip() and not first.holds_vip()


def test_an_edge_that_stops_answering_gives_the_address_away(nodes):
    first, other = holder(nodes)
    first.stop_edge()   # the holder's edge gone, keepalived and the host still up
    moved = wait_for("p%d" % other.index, BOUND_EDGE)
    print("\nvirtual IP answered by the other host %.1f s after the holder's edge stopped" % (moved or -1))
    assert moved is not None, through_vip()
    assert other.holds_vip() and not first.holds_vip()
