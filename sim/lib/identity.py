#!/usr/bin/env python3
"""Per-node identity files of the simulated A3 cluster (docs/SIM-CONTRACT.md).

    identity.py node-json NAME NODE=IP [NODE=IP ...]   -> /etc/a3sim/node.json of NAME
    identity.py hccn-conf NAME NODE=IP [NODE=IP ...]   -> /etc/hccn.conf of NAME

The NODE=IP arguments list the whole cluster in index order (p0 p1 d0 d1); sim/lib/common.sh
holds that table. Node index n, device d (Phy-ID 0..15): vNIC IP 127.31.<n>.<d+1>, RoCE IP
127.32.<n>.<d+1> with gateway 127.32.<n>.254 (as sim/tools/hccn_tool prints them). No packet is ever
sent to those addresses: the simulated tools only compare them.
"""
import json
import sys

NPUS = 16


def parse_nodes(pairs):
    nodes = []
    for pair in pairs:
        name, sep, ip = pair.partition("=")
        if not sep or not name or not ip:
            raise SystemExit(f"identity.py: expected NODE=IP, got {pair!r}")
        nodes.append((name, ip))
    return nodes


def vnic_ip(index, device):
    return f"127.31.{index}.{device + 1}"


def roce_ip(index, device):
    return f"127.32.{index}.{device + 1}"


def roce_gateway(index):
    return f"127.32.{index}.254"


def node_json(name, nodes):
    names = [n for n, _unused in nodes]
    if name not in names:
        raise SystemExit(f"identity.py: unknown node {name!r} (cluster: {' '.join(names)})")
    index = names.index(name)
    return {
        "name": name,
        "index": index,
        "business_ip": dict(nodes)[name],
        "npus": NPUS,
        "vnic_ips": {n: [vnic_ip(i, d) for d in range(NPUS)] for i, n in enumerate(names)},
    }


def hccn_conf(name, nodes):
    """The NPU RoCE configuration as `hccn_tool -i D -ip/-netdetect/-gateway -s ...` leaves it in
    /etc/hccn.conf; the same values the simulated `hccn_tool -ip/-netdetect/-gateway -g` print."""
    index = node_json(name, nodes)["index"]
    lines = []
    for d in range(NPUS):
        lines += [
            f"address_{d}={roce_ip(index, d)}",
            f"netmask_{d}=255.255.255.0",
            f"netdetect_{d}={roce_gateway(index)}",
            f"gateway_{d}={roce_gateway(index)}",
            f"send_arp_status_{d}=1",
        ]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) < 4 or argv[1] not in ("node-json", "hccn-conf"):
        raise SystemExit(__doc__)
    what, name, nodes = argv[1], argv[2], parse_nodes(argv[3:])
    if what == "node-json":
        sys.stdout.write(json.dumps(node_json(name, nodes), indent=2) + "\n")
    else:
        sys.stdout.write(hccn_conf(name, nodes))


if __name__ == "__main__":
    main(sys.argv)
