"""Shared logic of the simulated Ascend tools `npu-smi` and `hccn_tool` (Python 3.11 stdlib only).

Reads the node identity file and the fault file described in docs/SIM-CONTRACT.md:
  /etc/a3sim/node.json    (override: env A3SIM_NODE_FILE)
  /etc/a3sim/faults.json  (override: env A3SIM_FAULTS_FILE; absent = healthy)

Tool messages go to stdout like the real tools; problems of the simulation itself (unreadable
node.json or faults.json) go to stderr prefixed "a3sim:" with EXIT_SETUP.
"""
import io
import json
import os
import sys
import time
import zlib

NODE_FILE = "/etc/a3sim/node.json"
FAULTS_FILE = "/etc/a3sim/faults.json"
EXIT_SETUP = 3
DEFAULT_NPUS = 16
DRIVER_VERSION = "25.5.0"
_delay_s = 0.0  # the modelled latency slept by this call (Sim.delay), kept in the cache entry


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
        global _delay_s
        d = self.faults.get("delay_ms") or 0
        if isinstance(d, dict):
            d = d.get(op, d.get("*", 0))
        if d:
            _delay_s = float(d) / 1000
            time.sleep(_delay_s)

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
    return lo + span * zlib.crc32(repr(parts).encode()) / 2**32


def _store(entry, out, code):
    """Cache entry of the front end (sim/tools/hccn_tool): ENTRY.out, then ENTRY.rc ("rc delay_s"), each
    written to a temporary name and renamed, so a reader that finds .rc finds the whole .out. Best effort:
    an unwritable cache only means the next call runs Python again."""
    try:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        for suffix, text in ((".out", out), (".rc", f"{code} {_delay_s:g}\n")):
            tmp = f"{entry}{suffix}.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, entry + suffix)
    except OSError:
        pass


def run(main):
    """Run `main(argv) -> exit code`, turning ToolError into its message and code; store the answer in
    the front end's cache entry (env A3SIM_CACHE_ENTRY) unless it went to stderr."""
    real_stdout, sys.stdout = sys.stdout, io.StringIO()
    cacheable = True
    try:
        code = main(sys.argv[1:])
    except ToolError as e:
        print(e.message, file=sys.stderr if e.stderr else sys.stdout)
        code, cacheable = e.code, not e.stderr
    out, sys.stdout = sys.stdout.getvalue(), real_stdout
    sys.stdout.write(out)
    sys.stdout.flush()
    entry = os.environ.get("A3SIM_CACHE_ENTRY")
    if entry and cacheable:
        _store(entry, out, code)
    sys.exit(code)


def warm(name, main, queries):
    """Store the answer of every query (an argv) in the front end's cache under the key it passed in
    A3SIM_WARM_KEY (sim/tools/hccn_tool --a3sim-warm), one Python process for all of them. Answers on stderr are
    not stored, as in run(); returns how many were."""
    global _delay_s
    cache = os.environ.get("A3SIM_CACHE_DIR", "/tmp/a3sim-cache")
    key = os.environ["A3SIM_WARM_KEY"]
    stored = 0
    for argv in queries:
        _delay_s = 0.0
        real_stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            code = main(argv)
        except ToolError as e:
            if e.stderr:
                continue
            print(e.message)
            code = e.code
        finally:
            out, sys.stdout = sys.stdout.getvalue(), real_stdout
        _store(f"{cache}/{name}{key}.{'_'.join(argv)}", out, code)
        stored += 1
    return stored
