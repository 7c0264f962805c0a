"""Shared logic of the simulated Ascend tools `npu-smi` and `hccn_tool` (Python 3.11 stdlib only).

Reads the node identity file and the fault file described in docs/SIM-CONTRACT.md:
  /etc/a3sim/node.json    (override: env A3SIM_NODE_FILE)
  /etc/a3sim/faults.json  (override: env A3SIM_FAULTS_FILE; absent = healthy)

Tool messages go to stdout like the real tools; problems of the simulation itself (unreadable
node.json or faults.json) go to stderr prefixed "a3sim:" with EXIT_SETUP.
"""
import hashlib
import json
import os
import sys
import time

NODE_FILE = "/etc/a3sim/node.json"
FAULTS_FILE = "/etc/a3sim/faults.json"
EXIT_SETUP = 3
DEFAULT_NPUS = 16
DRIVER_VERSION = "25.5.0"


class ToolError(Exception):
    """Ends the tool: `message` on stdout (or stderr when `stderr`), then exit `code`."""

    def __init__(self, message, code, stderr=False):
        super().__init__(message)
        self.message, self.code, self.stderr = message, code, stderr


def _load(env, default, required):
    path = os.environ.get(env, default)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        if required:
            raise ToolError(f"a3sim: node file {path} not found", EXIT_SETUP, stderr=True)
        return {}
    except (OSError, ValueError) as e:
        raise ToolError(f"a3sim: cannot read {path}: {e}", EXIT_SETUP, stderr=True)
    if not isinstance(data, dict):
        raise ToolError(f"a3sim: {path} must hold a JSON object", EXIT_SETUP, stderr=True)
    return data


class Sim:
    """The simulated node: identity (node.json) plus injected faults (faults.json)."""

    def __init__(self, node_required=True):
        self.node = _load("A3SIM_NODE_FILE", NODE_FILE, node_required)
        self.faults = _load("A3SIM_FAULTS_FILE", FAULTS_FILE, False)

    @property
    def npus(self):
        return int(self.node.get("npus", DEFAULT_NPUS))

    @property
    def index(self):
        return int(self.node.get("index", 0))

    def in_list(self, key, dev):
        """True if device `dev` is listed in fault `key` (a list of Phy-IDs)."""
        return dev in {int(x) for x in self.faults.get(key) or []}

    def per_dev(self, key, dev, default):
        """Value of fault dict `key` for device `dev` (JSON keys are strings), else `default`."""
        return (self.faults.get(key) or {}).get(str(dev), default)

    def delay(self, op):
        """Fault `delay_ms`: a number (every command) or a dict op -> ms with optional "*" default."""
        d = self.faults.get("delay_ms") or 0
        if isinstance(d, dict):
            d = d.get(op, d.get("*", 0))
        if d:
            time.sleep(float(d) / 1000)

    def vnic_ips(self):
        """{ip: (node name, device)} for every node of the cluster."""
        try:
            return {ip: (name, d) for name, ips in self.node["vnic_ips"].items()
                    for d, ip in enumerate(ips)}
        except (KeyError, AttributeError, TypeError):
            raise ToolError("a3sim: node.json lacks a vnic_ips object", EXIT_SETUP, stderr=True)

    def own_vnic_ip(self, dev):
        try:
            return self.node["vnic_ips"][self.node["name"]][dev]
        except (KeyError, IndexError, TypeError):
            raise ToolError(f"a3sim: node.json has no vnic ip for device {dev}", EXIT_SETUP,
                            stderr=True)


def jitter(*parts, lo=0.0, span=1.0):
    """Deterministic pseudo-random float in [lo, lo+span) derived from `parts`."""
    h = int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big")
    return lo + span * h / 2**32


def run(main):
    """Run `main(argv) -> exit code`, turning ToolError into its message and code."""
    try:
        code = main(sys.argv[1:])
    except ToolError as e:
        print(e.message, file=sys.stderr if e.stderr else sys.stdout)
        code = e.code
    sys.stdout.flush()
    sys.exit(code)
