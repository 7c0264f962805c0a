"""External KV pool through an openYuanrong datasystem worker.

Mirrors the patched vLLM-Ascend yuanrong backend: configuration from
DS_WORKER_ADDR (+ DS_ENABLE_EXCLUSIVE_CONNECTION), a client connected at
worker start (failure is fatal), and exists/get/put whose errors are logged,
never raised (a broken pool silently degrades to cache misses).
"""

import hashlib
import os
import re
import socket
import threading

from vllm_sim.logutil import SimFatal, engine_log

YR_FILE = ("/vllm-workspace/vllm-ascend/vllm_ascend/distributed/kv_transfer/kv_pool/"
           "ascend_store/backend/yuanrong_backend.py")
_KEY_OK = re.compile(r"^[a-zA-Z0-9\-_!@#%\^\*\(\)\+\=\:;]+$")
_KEY_BAD = re.compile(r"[^a-zA-Z0-9\-_!@#%\^\*\(\)\+\=\:;]")
WHERE = "yuanrong_backend.py:180"


def normalize_key(key, max_len=1024):
    if len(key) <= max_len and _KEY_OK.match(key):
        return key
    suffix = "__" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return _KEY_BAD.sub("_", key)[:max_len - len(suffix)] + suffix


def split_host_port(addr):
    host, sep, port = (addr or "").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(addr)
    return host.strip("[]"), int(port)


class YuanrongPool:
    def __init__(self):
        addr = os.environ.get("DS_WORKER_ADDR")
        try:
            from yr.datasystem import KVClient  # noqa: F401  (lazy, optional dependency)
        except ImportError:
            raise SimFatal(
                "ImportError", "Please install openyuanrong-datasystem to use the yuanrong backend.",
                frames=[(YR_FILE, 102, "__init__",
                         'raise ImportError("Please install openyuanrong-datasystem to use the '
                         'yuanrong backend.") from exc')],
                chained=[("ModuleNotFoundError", "No module named 'yr'")])
        if not addr:
            raise SimFatal(
                "ValueError",
                "Environment variable DS_WORKER_ADDR is required, expected format '<host>:<port>'.",
                frames=[(YR_FILE, 108, "__init__", "self.config = YuanrongConfig.load_from_env()"),
                        (YR_FILE, 33, "load_from_env",
                         'raise ValueError("Environment variable DS_WORKER_ADDR is required, '
                         "expected format '<host>:<port>'.\")")])
        try:
            host, port = split_host_port(addr)
        except ValueError:
            raise SimFatal("ValueError", f"Invalid DS_WORKER_ADDR '{addr}', expected '<host>:<port>'.",
                           frames=[(YR_FILE, 112, "__init__", "raise ValueError(")])
        self.addr = addr
        self.exclusive = bool(int(os.environ.get("DS_ENABLE_EXCLUSIVE_CONNECTION", "0") or 0))
        timeout_ms = int(os.environ.get("A3SIM_DS_CONNECT_TIMEOUT_MS", "10000"))
        # Fast path: nothing listening at all -> fail now with the SDK's wording
        # instead of waiting for the whole connect timeout.
        try:
            with socket.create_connection((host, port), timeout=min(5.0, timeout_ms / 1000.0)):
                pass
        except OSError as e:
            raise self._init_failed(
                f"code: [RPC unavailable], msg: [Connect to datasystem worker {addr} failed: "
                f"{e.strerror or e}. Rpc service has not responded within the allowed time.]")
        from yr.datasystem import KVClient
        self._lock = threading.Lock()
        self._client = KVClient(host, port, connect_timeout_ms=timeout_ms,
                                enable_exclusive_connection=self.exclusive)
        try:
            self._client.init()
        except Exception as e:  # RuntimeError from the SDK
            raise self._init_failed(str(e))
        engine_log.info(WHERE, "Yuanrong datasystem client connected to worker %s "
                        "(exclusive_connection=%s)", addr, self.exclusive)

    @staticmethod
    def _init_failed(msg):
        return SimFatal("RuntimeError", msg, frames=[
            (YR_FILE, 119, "__init__", "self._hetero_client.init()"),
            ("/usr/local/lib/python3.11/site-packages/yr/datasystem/hetero_client.py", 96, "init",
             "raise RuntimeError(status.to_string())")])

    def exists(self, keys):
        if not keys:
            return []
        try:
            with self._lock:
                res = self._client.exist([normalize_key(k) for k in keys])
            return [bool(v) for v in res]
        except Exception as e:
            engine_log.error(WHERE, "Failed to check keys. keys_count=%d, type=%s, error=%s. "
                             "Check network and yuanrong service.", len(keys), type(e).__name__, e)
            return [False] * len(keys)

    def get(self, keys):
        """Values (bytes or None) for keys; failures logged and returned as None."""
        if not keys:
            return []
        try:
            with self._lock:
                vals = self._client.get([normalize_key(k) for k in keys])
        except Exception as e:
            engine_log.error(WHERE, "Failed to get keys: %d keys out of %d. type=%s, error=%s. "
                             "Check network and yuanrong service.", len(keys), len(keys),
                             type(e).__name__, e)
            return [None] * len(keys)
        vals = list(vals) + [None] * (len(keys) - len(vals))
        missing = sum(1 for v in vals if v is None)
        if missing:
            engine_log.error(WHERE, "Failed to get keys: %d keys out of %d. "
                             "Check key existence and memory state.", missing, len(keys))
        return vals

    def put(self, keys, values):
        if not keys:
            return 0
        try:
            with self._lock:
                self._client.mset([normalize_key(k) for k in keys], list(values))
            return len(keys)
        except Exception as e:
            engine_log.error(WHERE, "Failed to put keys: %d keys out of %d. type=%s, error=%s. "
                             "Check network and yuanrong service.", len(keys), len(keys),
                             type(e).__name__, e)
            return 0
