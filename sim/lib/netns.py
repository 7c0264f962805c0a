"""Call a function from inside a simulated node's network namespace (Python 3.11 standard library).

A node of the netns mode (A3SIM_NET=netns sim/cluster.sh up, sim/lib/net.sh) has a namespace of its own, so what
listens on its 127.0.0.1 (the proxy's admin listener, by default) is reachable from that node only, as on a real
server. in_node(NODE, fn, ...) runs fn in a thread that joined NODE's namespace (setns(2) changes the network
namespace of the calling thread only), so sockets fn opens are the node's; a node of the default mode shares this
machine's namespace and fn simply runs here. Joining another namespace needs root (CAP_SYS_ADMIN).
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading

NODE_PREFIX = os.environ.get("A3SIM_NODE_PREFIX", "a3sim-")
CLONE_NEWNET = 0x40000000


def node_netns_pid(node: str) -> int | None:
    """The pid of NODE's container when it runs in a namespace of its own (label a3sim.net=netns), else None."""
    out = subprocess.run(["docker", "inspect", "-f", '{{index .Config.Labels "a3sim.net"}} {{.State.Pid}}',
                          NODE_PREFIX + node], capture_output=True, text=True, timeout=30, check=True).stdout.split()
    return int(out[1]) if out and out[0] == "netns" and int(out[1]) > 0 else None


def in_node(node: str, fn, *args, **kwargs):
    """fn(*args, **kwargs) with NODE's network: its return value, or its exception raised here."""
    pid = node_netns_pid(node)
    if pid is None:
        return fn(*args, **kwargs)
    box = {}

    def run():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, "setns into %s's network namespace: %s" % (node, os.strerror(err)))
        finally:
            os.close(fd)
        box["value"] = fn(*args, **kwargs)

    def guarded():
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
            box["error"] = exc

    thread = threading.Thread(target=guarded, name="in-%s" % node, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
