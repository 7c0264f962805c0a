"""Simulated MooncakeConnectorV1: per-rank side-channel ports and KV pulls.

Each instance binds ``kv_port + dp_rank*tp .. + tp-1`` on HCCL_IF_IP (one
handshake port per TP rank, like the real connector). A prefill (producer)
keeps the "KV" of every request it finished with ``do_remote_decode`` until a
decode pulls it or ``VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`` seconds pass. A
decode (consumer) pulls over TCP from ``remote_host:remote_port+i``.

Wire protocol (one JSON object per line, one request per connection):
  -> {"op": "pull", "remote_request_id": ..., "remote_engine_id": ..., "num_tokens": N,
      "digest": ...}
  <- {"ok": true, "num_tokens": N, "digest": ..., "corrupt": false}
  -> {"op": "done", "remote_request_id": ...}      (frees the blocks)
  <- {"ok": true}
"""

import errno
import json
import os
import socket
import threading
import time
import zlib

from vllm_sim.logutil import SimFatal, engine_log

WHERE = "mooncake_connector.py:1277"


def abort_timeout_s():
    try:
        return float(os.environ.get("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", "480"))
    except ValueError:
        return 480.0


class PendingKV:
    def __init__(self):
        self._lock = threading.Lock()
        self._reqs = {}

    def add(self, request_id, entry):
        entry["created"] = time.time()
        with self._lock:
            self._reqs[request_id] = entry

    def pop_expired(self):
        limit = abort_timeout_s()
        now = time.time()
        expired = []
        with self._lock:
            for rid, e in list(self._reqs.items()):
                if now - e["created"] > limit:
                    del self._reqs[rid]
                    expired.append(rid)
        for rid in expired:
            engine_log.info("mooncake_connector.py:181", "Force freed request: %s", rid)
        return expired

    def get(self, request_id):
        self.pop_expired()
        with self._lock:
            return self._reqs.get(request_id)

    def free(self, request_id):
        with self._lock:
            return self._reqs.pop(request_id, None) is not None

    def __len__(self):
        with self._lock:
            return len(self._reqs)


class MooncakePorts:
    def __init__(self, host, base_port, tp, engine_id, pending):
        self.host = host
        self.base_port = base_port
        self.tp = tp
        self.engine_id = engine_id
        self.pending = pending
        self.socks = []
        self._stop = threading.Event()

    def bind(self):
        for i in range(self.tp):
            port = self.base_port + i
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.host, port))
                s.listen(64)
            except OSError as e:
                s.close()
                self.close()
                text = {errno.EADDRINUSE: "Address already in use",
                        errno.EADDRNOTAVAIL: "Cannot assign requested address"}.get(
                            e.errno, e.strerror or str(e))
                raise SimFatal(
                    "zmq.error.ZMQError", f"{text} (addr='tcp://{self.host}:{port}')",
                    frames=[("/vllm-workspace/vllm-ascend/vllm_ascend/distributed/kv_transfer/kv_p2p/"
                             "mooncake_connector.py", 1696, "make_zmq_socket", "socket.bind(path)"),
                            ("/usr/local/lib/python3.11/site-packages/zmq/sugar/socket.py", 311, "bind",
                             "super().bind(addr)"),
                            ("_zmq.py", 917, "zmq.backend.cython._zmq.Socket.bind", ""),
                            ("_zmq.py", 179, "zmq.backend.cython._zmq._check_rc", "")],
                    log_line="KV Cache sending/receiving thread failed to start.")
            self.socks.append(s)
        for s in self.socks:
            threading.Thread(target=self._accept_loop, args=(s,), daemon=True).start()
        threading.Thread(target=self._sweeper, daemon=True).start()
        engine_log.info(WHERE, "Mooncake handshake ports %d-%d bound on %s (engine_id=%s)",
                        self.base_port, self.base_port + self.tp - 1, self.host, self.engine_id)

    def _sweeper(self):
        while not self._stop.wait(1.0):
            self.pending.pop_expired()

    def _accept_loop(self, s):
        while not self._stop.is_set():
            try:
                conn, _addr = s.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            conn.settimeout(30)
            f = conn.makefile("rwb")
            for line in f:
                try:
                    msg = json.loads(line)
                except ValueError:
                    break
                rid = msg.get("remote_request_id")
                if msg.get("op") == "pull":
                    if msg.get("remote_engine_id") not in (None, self.engine_id):
                        reply = {"ok": False, "error": f"engine id mismatch: {msg.get('remote_engine_id')}"
                                 f" != {self.engine_id}"}
                    else:
                        entry = self.pending.get(rid)
                        if entry is None:
                            reply = {"ok": False, "error": f"request {rid} not found (already freed or "
                                     "expired after VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)"}
                        else:
                            reply = {"ok": True, "num_tokens": entry["num_tokens"],
                                     "digest": entry["digest"], "corrupt": entry["corrupt"]}
                elif msg.get("op") == "done":
                    self.pending.free(rid)
                    reply = {"ok": True}
                else:
                    reply = {"ok": False, "error": "bad op"}
                f.write((json.dumps(reply) + "\n").encode())
                f.flush()
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def close(self):
        self._stop.set()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.socks = []


def pull_kv(params, digest, num_tokens):
    """Pull the KV described by kv_transfer_params; returns the remote entry or raises."""
    host = params.get("remote_host")
    port = params.get("remote_port")
    rid = params.get("remote_request_id")
    if not host or port is None or not rid:
        raise RuntimeError(f"incomplete kv_transfer_params: remote_host={host!r}, "
                           f"remote_port={port!r}, remote_request_id={rid!r}")
    ptp = int(params.get("remote_ptp_size") or 1)
    target = int(port) + (zlib.crc32(str(rid).encode()) % max(1, ptp))
    timeout = float(os.environ.get("A3SIM_KV_PULL_TIMEOUT_S", "5"))
    with socket.create_connection((host, target), timeout=timeout) as s:
        s.settimeout(timeout)
        f = s.makefile("rwb")
        f.write((json.dumps({"op": "pull", "remote_request_id": rid,
                             "remote_engine_id": params.get("remote_engine_id"),
                             "num_tokens": num_tokens, "digest": digest}) + "\n").encode())
        f.flush()
        line = f.readline()
        if not line:
            raise RuntimeError(f"connection closed by {host}:{target}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"Mooncake transfer failed from {host}:{target}: {reply.get('error')}")
        f.write((json.dumps({"op": "done", "remote_request_id": rid}) + "\n").encode())
        f.flush()
        f.readline()
        return reply
