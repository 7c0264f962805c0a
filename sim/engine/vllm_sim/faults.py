"""Injected faults the engine simulator obeys (the node's faults.json, see docs/SIM-CONTRACT.md).

The node's fault file is `/etc/a3sim/faults.json`; `/etc/a3sim` is a symlink into the driver
directory, which the vllm container mounts, so inside the container the engine reads
`/usr/local/Ascend/driver/a3sim/faults.json` (env `A3SIM_FAULTS_FILE` overrides the path, as it
does for the simulated npu-smi and hccn_tool).

Key read here:
  "engine_hang": {"since": <unix epoch seconds>, "ports": [6700]}   ("ports" optional)
  "engine_stall": {"since": ..., "ports": [...]}   the same engines start answering, then stop: a stream after its
                  first token's event, a non-stream answer after half of its body (a rank frozen mid-answer)
An engine process that started before `since` (and whose --port is listed, if "ports" is given)
is hung: /health, /ping, /metrics, /v1/models still answer, but completions are accepted and then
never answered while the key is present. An engine started after `since` (a restarted one) is
healthy. A missing, unreadable or malformed file means no fault (a malformed one is logged once).
"""

import json
import os
import threading

from vllm_sim.hostenv import env_path
from vllm_sim.logutil import engine_log

DEFAULT_FAULTS_FILE = "/usr/local/Ascend/driver/a3sim/faults.json"


class FaultFile:
    """The fault file, parsed again only when its stat (mtime, size, inode) changes."""

    def __init__(self, path=None):
        self.path = path or env_path("A3SIM_FAULTS_FILE", DEFAULT_FAULTS_FILE)
        self._lock = threading.Lock()
        self._key = None          # stat key of the parsed version, None = file absent
        self._data = {}
        self._warned = set()      # stat keys (or problems) already logged

    def _warn_once(self, key, msg, *args):
        if key in self._warned:
            return
        self._warned.add(key)
        engine_log.warning("a3sim_faults.py:1", msg, *args)

    def read(self):
        """The fault object ({} when absent, unreadable or malformed)."""
        try:
            st = os.stat(self.path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            key = None
        except OSError as e:
            with self._lock:
                self._warn_once(("stat", str(e)), "a3sim: cannot stat fault file %s (%s); "
                                "treating it as no fault", self.path, e)
                self._key, self._data = ("stat-error",), {}
            return {}
        with self._lock:
            if key == self._key:
                return self._data
            data = {}
            if key is not None:
                try:
                    with open(self.path, encoding="utf-8") as f:
                        data = json.load(f)
                    if not isinstance(data, dict):
                        raise ValueError("not a JSON object")
                except FileNotFoundError:
                    data = {}
                except (OSError, ValueError) as e:
                    self._warn_once(key, "a3sim: cannot read fault file %s (%s); treating it as no fault",
                                    self.path, e)
                    data = {}
            self._key, self._data = key, data
            return data

    def hang_spec(self, key="engine_hang"):
        """(since, ports or None) of a well-formed engine_hang (or engine_stall) key, else None."""
        spec = self.read().get(key)
        if spec is None:
            return None
        since = spec.get("since") if isinstance(spec, dict) else None
        ports = spec.get("ports") if isinstance(spec, dict) else None
        ok = (isinstance(since, (int, float)) and not isinstance(since, bool)
              and (ports is None or (isinstance(ports, list)
                                     and all(isinstance(p, int) and not isinstance(p, bool) for p in ports))))
        if not ok:
            with self._lock:
                self._warn_once((key, self._key), "a3sim: malformed %s in %s: %s "
                                "(expected {\"since\": <epoch seconds>, \"ports\": [<port>, ...]}); ignored",
                                key, self.path, json.dumps(spec))
            return None
        return float(since), (set(ports) if ports is not None else None)

    def engine_hung(self, start_time, port, key="engine_hang"):
        """True if an engine that started at `start_time` (epoch s) and serves `port` is hung now (engine_hang: no
        answer at all; engine_stall with key="engine_stall": the answer stops after its first part)."""
        spec = self.hang_spec(key)
        if spec is None:
            return False
        since, ports = spec
        return start_time < since and (ports is None or port in ports)

    def engine_stalled(self, start_time, port):
        return self.engine_hung(start_time, port, "engine_stall")
