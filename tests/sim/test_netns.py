# -*- coding: utf-8 -*-
"""The simulated cluster in network namespaces of its own (A3SIM_NET=netns sim/cluster.sh up, sim/lib/net.sh):
each node's business IP on its eth0, the nodes and this machine reaching each other over the bridge, the registry
and the artifact server at the bridge's address, an address that one node holds answered by that node only (what
the proxies' virtual IP needs), and a node's link that goes down (a node lost as a whole) and comes back. The
module ends by bringing the nodes back in the default mode (host). Needs root and the docker engine
(sim/cluster.sh deps); traffic stays on 127.30.0.0/24."""
from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "sim/cluster.sh"
NODES = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
BRIDGE_IP, SHARED_IP, PORT = "127.30.0.1", "127.30.0.10", 7777
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# answers every GET with the node's name (argv[1]), on every address of its namespace
SERVER = ("import http.server,sys\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        b = sys.argv[1].encode(); self.send_response(200); self.send_header('Content-Length', str(len(b)))\n"
          "        self.end_headers(); self.wfile.write(b)\n"
          "    def log_message(self, *a): pass\n"
          "http.server.ThreadingHTTPServer(('0.0.0.0', %d), H).serve_forever()\n" % PORT)


def cluster(*args, mode, fresh=False):
    return subprocess.run([str(CLUSTER), *args], capture_output=True, text=True, timeout=900, check=False,
                          env=dict(os.environ, A3SIM_NET=mode, A3SIM_FRESH="1" if fresh else "0"))


def node_sh(node, cmd):
    return subprocess.run(["docker", "exec", "a3sim-" + node, "sh", "-c", cmd], capture_output=True, text=True,
                          timeout=60, check=False)


def get(ip, timeout=3.0):
    with _OPENER.open("http://%s:%d/" % (ip, PORT), timeout=timeout) as resp:
        return resp.read().decode()


def host_lo_ips():
    return subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "lo"], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def netns_cluster():
    if os.geteuid() != 0:
        pytest.fail("the network-namespace mode plumbs veth pairs: run as root (CI does)", pytrace=False)
    up = cluster("up", mode="netns", fresh=True)   # new nodes: nothing of an earlier run listens on the test port
    assert up.returncode == 0, up.stderr[-3000:]
    for node in NODES:
        subprocess.run(["docker", "exec", "-d", "a3sim-" + node, "python3", "-c", SERVER, node], check=True,
                       timeout=60)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if all(node_sh(n, "python3 -c 'import socket; socket.create_connection((\"%s\", %d), 1)'" % (ip, PORT))
               .returncode == 0 for n, ip in NODES.items()):
            break
        time.sleep(0.5)
    yield
    back = cluster("up", mode="host")   # the default mode again (new nodes: molecule and the live tests expect it)
    assert back.returncode == 0, back.stderr[-3000:]
    assert all(" %s/32 " % ip in host_lo_ips() for ip in NODES.values())
    assert subprocess.run(["ip", "link", "show", "a3sim-br"], capture_output=True, check=False).returncode != 0


def test_each_node_holds_its_business_ip_on_its_own_eth0(netns_cluster):
    for node, ip in NODES.items():
        assert " %s/24 " % ip in node_sh(node, "ip -o -4 addr show dev eth0").stdout, node
        assert " %s/32 " % ip not in host_lo_ips()


def test_nodes_and_this_machine_reach_each_other_and_the_registry(netns_cluster):
    for node, ip in NODES.items():
        assert get(ip) == node                                  # this machine -> node
        other = "d1" if node != "d1" else "p0"
        assert node_sh(other, "curl -sS -m 3 http://%s:%d/" % (ip, PORT)).stdout == node   # node -> node
    for port in (5000, 5001):   # the registry and the artifact server, at the bridge's address
        out = node_sh("d0", "curl -sS -m 3 -o /dev/null -w '%%{http_code}' http://%s:%d/" % (BRIDGE_IP, port)).stdout
        assert out == "200", (port, out)


def test_an_address_one_node_holds_is_answered_by_that_node_only(netns_cluster):
    assert node_sh("p1", "ip addr add %s/32 dev eth0" % SHARED_IP).returncode == 0
    try:
        assert get(SHARED_IP) == "p1"
        assert node_sh("d0", "curl -sS -m 3 http://%s:%d/" % (SHARED_IP, PORT)).stdout == "p1"
        # p0 listens on 0.0.0.0 too, but the address is not in its namespace: its own request goes to p1
        assert node_sh("p0", "curl -sS -m 3 http://%s:%d/" % (SHARED_IP, PORT)).stdout == "p1"
    finally:
        node_sh("p1", "ip addr del %s/32 dev eth0" % SHARED_IP)


def test_a_node_whose_link_goes_down_is_unreachable_until_it_comes_back(netns_cluster):
    down = cluster("link", "d1", "down", mode="netns")
    assert down.returncode == 0, down.stderr
    try:
        with pytest.raises(OSError):
            socket.create_connection((NODES["d1"], PORT), timeout=2).close()
        assert node_sh("p0", "curl -sS -m 2 http://%s:%d/" % (NODES["d1"], PORT)).returncode != 0
        assert get(NODES["d0"]) == "d0"                         # the others are not affected
    finally:
        up = cluster("link", "d1", "up", mode="netns")
    assert up.returncode == 0, up.stderr
    assert get(NODES["d1"]) == "d1"
    assert node_sh("p0", "curl -sS -m 3 http://%s:%d/" % (NODES["d1"], PORT)).stdout == "d1"


def test_a_partition_cuts_the_node_off_from_the_other_nodes_only_and_heals(netns_cluster):
    cut = subprocess.run([str(CLUSTER), "partition", "d0"], capture_output=True, text=True, timeout=120, check=False)
    assert cut.returncode == 0 and "by address" in cut.stdout, cut.stdout + cut.stderr
    try:
        assert node_sh("p0", "curl -sS -m 2 http://%s:%d/" % (NODES["d0"], PORT)).returncode != 0
        assert node_sh("d0", "curl -sS -m 2 http://%s:%d/" % (NODES["p1"], PORT)).returncode != 0
        assert node_sh("p0", "curl -sS -m 3 http://%s:%d/" % (NODES["d1"], PORT)).stdout == "d1"   # others unaffected
        assert get(NODES["d0"]) == "d0"           # clients on this machine still reach it, as clients in front would
    finally:
        healed = subprocess.run([str(CLUSTER), "heal"], capture_output=True, text=True, timeout=120, check=False)
    assert healed.returncode == 0, healed.stderr
    assert node_sh("p0", "curl -sS -m 3 http://%s:%d/" % (NODES["d0"], PORT)).stdout == "d0"


def test_link_refuses_an_unknown_node():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    res = subprocess.run([str(CLUSTER), "link", "nosuchnode", "down"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert res.returncode != 0 and "usage: cluster.sh link NODE down|up" in res.stderr
