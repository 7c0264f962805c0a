#!/usr/bin/env python3
"""Network partitions of the simulated A3 cluster: cut one node off from the other nodes, heal the cut.

The nodes share this machine's network namespace (each has its own loopback address, docs/SIM-CONTRACT.md), and a
process connecting to another node's address gets that address as its source too, so addresses alone cannot tell
whose packet it is. The sockets' cgroup can: every process of a node (the node container's own, and those of the
containers its docker engine runs, which sit beside it in the cgroup tree) is given the node's net_cls class id,
and packet-filter rules in a chain of our own (A3SIM-PART, jumped to from OUTPUT, where loopback traffic passes)
drop what a cut node's processes send to the other nodes' addresses and what the other nodes send to its address.
Clients on this machine outside the nodes (a load generator, the tests) still reach every node, as clients in front
of a cut would. TCP connections are not reset: they stall, and go on when the cut heals (as after a real one).
Nodes in network namespaces of their own (A3SIM_NET=netns, their container's label a3sim.net) send to each other
over the bridge a3sim-br, so their packets pass FORWARD (br_netfilter) and carry their own source address: the
same chain, jumped to from FORWARD instead, then drops by address, and no cgroup is needed.

  partition.py cut NODE      cut NODE off (idempotent)
  partition.py heal [NODE]   heal NODE's cut, or every cut and the chain itself
  partition.py status        the cuts in place

Needs root, iptables with the cgroup match, and the cgroup v1 net_cls hierarchy at /sys/fs/cgroup/net_cls
(`sim/cluster.sh deps` mounts it). Only rules and cgroups this script made are ever changed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

NODE_IPS = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
NODE_PREFIX = os.environ.get("A3SIM_NODE_PREFIX", "a3sim-")
NET_CLS = os.environ.get("A3SIM_NET_CLS", "/sys/fs/cgroup/net_cls")
CHAIN = "A3SIM-PART"
CLASS_BASE = 0x00A30000          # class id of node i (p0, p1, d0, d1 order): CLASS_BASE + i + 1


class PartitionError(Exception):
    pass


def class_id(node: str) -> int:
    return CLASS_BASE + list(NODE_IPS).index(node) + 1


def comment(node: str) -> str:
    return "a3sim-cut-" + node


def cut_rules(node: str, netns: bool = False) -> list:
    """The iptables rule specs (after -A CHAIN) that cut node off: its processes to the others' addresses, the
    others' processes to its address (netns: its address to theirs, theirs to its)."""
    rules = []
    for other, ip in NODE_IPS.items():
        if other == node:
            continue
        if netns:
            rules.append(["-s", NODE_IPS[node] + "/32", "-d", ip + "/32"])
            rules.append(["-s", ip + "/32", "-d", NODE_IPS[node] + "/32"])
            continue
        rules.append(["-m", "cgroup", "--cgroup", "0x%08x" % class_id(node), "-d", ip + "/32"])
        rules.append(["-m", "cgroup", "--cgroup", "0x%08x" % class_id(other), "-d", NODE_IPS[node] + "/32"])
    return [r + ["-m", "comment", "--comment", comment(node), "-j", "DROP"] for r in rules]


def cuts_in(listing: str) -> list:
    """The nodes cut according to `iptables -S CHAIN` output."""
    return sorted(set(re.findall(r'--comment "?a3sim-cut-(\w+)"?', listing)))


def rule_lines_of(listing: str, node: str) -> list:
    """The `-A CHAIN ...` lines of node's cut in `iptables -S CHAIN` output, as argument lists for -D."""
    out = []
    for line in listing.splitlines():
        if line.startswith("-A %s " % CHAIN) and re.search(r'--comment "?%s"?( |$)' % re.escape(comment(node)), line):
            out.append(line.split()[2:])
    return out


def node_of(cgroup_text: str, ids: dict):
    """The node whose container (or one of whose own containers) a process belongs to, from /proc/PID/cgroup text
    and ids {node: [container ids]}; None for a process of no node."""
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or parts[1] in ("", "net_cls", "net_cls,net_prio"):
            continue
        for node, node_ids in ids.items():
            if any(cid and cid in parts[2] for cid in node_ids):
                return node
    return None


def net_cls_path(cgroup_text: str):
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "net_cls" in parts[1].split(","):
            return parts[2]
    return None


# ------------------------------------------------------------------------------------------------ effects

def _run(argv, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if check and done.returncode != 0:
        raise PartitionError("%s failed (exit %d): %s" % (" ".join(argv), done.returncode,
                                                          (done.stderr or done.stdout).strip()))
    return done


def container_ids() -> dict:
    """{node: [its container's id, then the ids of the containers its own docker engine runs]} of running nodes."""
    ids = {}
    for node in NODE_IPS:
        name = NODE_PREFIX + node
        own = _run(["docker", "inspect", "-f", "{{.Id}}", name], check=False).stdout.strip()
        if not own:
            continue
        nested = _run(["docker", "exec", name, "docker", "ps", "-q", "--no-trunc"], check=False).stdout.split()
        ids[node] = [own] + nested
    return ids


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def classify(ids: dict) -> dict:
    """Give every process of each node the node's net_cls class id: the cgroup docker made for it gets the id, a
    process still in the hierarchy's root moves into a3sim-<node> (its children inherit it). Two passes, so
    processes forked during the first are caught. Returns {node: processes seen}."""
    if not os.path.isfile(os.path.join(NET_CLS, "net_cls.classid")):
        raise PartitionError("the net_cls cgroup hierarchy is not mounted at %s: run sim/cluster.sh deps "
                             "(cgroup v1 hosts only)" % NET_CLS)
    seen = dict.fromkeys(ids, 0)
    for _unused in range(2):
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                with open("/proc/%s/cgroup" % pid, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue    # gone meanwhile
            node = node_of(text, ids)
            if node is None:
                continue
            seen[node] += 1
            path = net_cls_path(text) or "/"
            want = "%d" % class_id(node)
            if path == "/":
                group = os.path.join(NET_CLS, "a3sim-" + node)
                os.makedirs(group, exist_ok=True)
                _write(os.path.join(group, "net_cls.classid"), want)
                try:
                    _write(os.path.join(group, "cgroup.procs"), pid)
                except OSError:
                    pass    # ended meanwhile
            else:
                _write(os.path.join(NET_CLS, path.lstrip("/"), "net_cls.classid"), want)
    return seen


def listing() -> str:
    done = _run(["iptables", "-S", CHAIN], check=False)
    return done.stdout if done.returncode == 0 else ""


HOOKS = ("OUTPUT", "FORWARD")   # where the nodes' packets pass: sharing this machine's namespace, or bridged


def hook_of(netns: bool) -> str:
    """The hook that jumps to the chain: FORWARD for bridged nodes, else OUTPUT (where loopback traffic passes; the
    cgroup match is refused in a chain reachable from FORWARD)."""
    return "FORWARD" if netns else "OUTPUT"


def ensure_chain(netns: bool = False) -> None:
    if _run(["iptables", "-S", CHAIN], check=False).returncode != 0:
        _run(["iptables", "-N", CHAIN])
    hook = hook_of(netns)
    if _run(["iptables", "-C", hook, "-j", CHAIN], check=False).returncode != 0:
        _run(["iptables", "-I", hook, "1", "-j", CHAIN])


def in_netns(node: str) -> bool:
    """The node runs in a network namespace of its own (sim/lib/net.sh labels its container a3sim.net=netns)."""
    label = _run(["docker", "inspect", "-f", '{{index .Config.Labels "a3sim.net"}}', NODE_PREFIX + node], check=False)
    return label.stdout.strip() == "netns"


def cut(node: str) -> str:
    ids = container_ids()
    if node not in ids:
        raise PartitionError("node %s (container %s%s) is not running" % (node, NODE_PREFIX, node))
    netns = in_netns(node)
    seen = {} if netns else classify(ids)
    ensure_chain(netns)
    if node in cuts_in(listing()):
        return "%s: already cut off" % node
    for rule in cut_rules(node, netns):
        _run(["iptables", "-A", CHAIN] + rule)
    how = ("by address (network namespaces of their own)" if netns else "%s processes of the nodes classified"
           % ", ".join("%s %d" % kv for kv in sorted(seen.items())))
    return "%s: cut off from %s (%s)" % (node, ", ".join(n for n in NODE_IPS if n != node), how)


def heal(node: str = "") -> str:
    text = listing()
    if not text:
        return "no cut (chain %s absent)" % CHAIN
    if node:
        for rule in rule_lines_of(text, node):
            _run(["iptables", "-D", CHAIN] + rule)
        return "%s: cut healed" % node
    for hook in HOOKS:
        while _run(["iptables", "-C", hook, "-j", CHAIN], check=False).returncode == 0:
            _run(["iptables", "-D", hook, "-j", CHAIN])
    _run(["iptables", "-F", CHAIN])
    _run(["iptables", "-X", CHAIN])
    return "every cut healed (%s)" % (", ".join(cuts_in(text)) or "none was in place")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) == 2 and argv[0] == "cut" and argv[1] in NODE_IPS:
            print(cut(argv[1]))
        elif argv[:1] == ["heal"] and len(argv) <= 2 and (len(argv) == 1 or argv[1] in NODE_IPS):
            print(heal(argv[1] if len(argv) == 2 else ""))
        elif argv == ["status"]:
            print("cut off: %s" % (", ".join(cuts_in(listing())) or "none"))
        else:
            print(__doc__.split("\n\n")[2], file=sys.stderr)
            return 2
    except PartitionError as exc:
        print("partition.py: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
