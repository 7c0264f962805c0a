"""Data-parallel group formation across hosts (external DP, one rank per process).

Rank 0 listens on --data-parallel-address:--data-parallel-rpc-port; every
other rank connects (retrying) and sends one JSON line
``{"op": "join", "rank": r, "dp_size": n, "host": ip, "api_port": p}``.
When all dp_size ranks are present rank 0 answers ``{"op": "formed", ...}`` to
each. Connections stay open afterwards: if a member disappears, the others
exit (a dead DP peer wedges/kills a real MoE DP group too). A rank that tries to
join an already formed group is rejected and keeps retrying until its timeout,
so one side of a group cannot be restarted alone.
Timeout: A3SIM_DP_TIMEOUT_S, else VLLM_ENGINE_READY_TIMEOUT_S, else 120 s.

Lockstep (what real MoE DP groups do: every rank joins each forward's collectives,
idle ranks run dummy batches): once formed, rank 0 sends ``{"op": "step", "n": N}``
to every member every A3SIM_STEP_INTERVAL_S (0.05 s) and the next step only after
every member answered ``{"op": "done", "n": N}``. A member that stops stepping
(a frozen process, a node cut off by the network) therefore stalls the whole
group, while every API server keeps answering /health. Request work (the
prefill, each output token) passes wait_live(): it goes on at once while the
group steps, waits while it does not, and after the execution timeout
(A3SIM_HCCL_EXEC_TIMEOUT_S, else HCCL's own HCCL_EXEC_TIMEOUT, else 1800 s, as
HCCL) the waiting rank fails with HCCL's timeout text (on_exec_timeout) and exits.
"""

import errno
import json
import os
import socket
import threading
import time

from vllm_sim.logutil import SimFatal, engine_log

WHERE = "core.py:1021"
CORE = "/usr/local/lib/python3.11/site-packages/vllm/v1/engine/core.py"


def _env_seconds(names, default):
    """The first of the variables names that holds a number, else default."""
    for name in names:
        v = os.environ.get(name)
        if v:
            try:
                return float(v)
            except ValueError:
                pass
    return default


def dp_timeout_s():
    return _env_seconds(("A3SIM_DP_TIMEOUT_S", "VLLM_ENGINE_READY_TIMEOUT_S"), 120.0)


def exec_timeout_s():
    """HCCL's execution timeout: how long a rank waits in a collective that does not complete."""
    return _env_seconds(("A3SIM_HCCL_EXEC_TIMEOUT_S", "HCCL_EXEC_TIMEOUT"), 1800.0)


def step_interval_s():
    return max(0.005, _env_seconds(("A3SIM_STEP_INTERVAL_S",), 0.05))


class GroupStalled(Exception):
    """The DP group did not step within the execution timeout (or is shutting down): the request cannot finish."""


def _minutes(seconds):
    m = seconds / 60.0
    return str(int(m)) if m == int(m) else (f"{m:.2f}".rstrip("0").rstrip(".") or "0")


class DPGroup:
    def __init__(self, rank, size, address, port, my_ip, api_port, stop_event):
        self.rank = rank
        self.size = size
        self.address = address
        self.port = port
        self.my_ip = my_ip
        self.api_port = api_port
        self.stop = stop_event
        self.timeout = dp_timeout_s()
        self.listener = None
        self.members = {}  # rank -> socket (rank 0) ; {0: socket} elsewhere
        self.formed = False
        self._lock = threading.Lock()
        self.on_loss = None
        # lockstep (see the module's text)
        self.on_exec_timeout = None
        self.interval = step_interval_s()
        self.stall_after = max(1.0, 10 * self.interval)   # a step older than this: the group is stalled
        self.exec_timeout = exec_timeout_s()
        self.seq = 0
        self.last_step = time.monotonic()
        self._pending = set()       # rank 0: members that have not answered step seq
        self._timed_out = False

    # ------------------------------------------------------------------ rank 0
    def listen(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.address, self.port))
            s.listen(64)
        except OSError as e:
            s.close()
            text = {errno.EADDRINUSE: "[Errno 98] Address already in use",
                    errno.EADDRNOTAVAIL: "[Errno 99] Cannot assign requested address"}.get(
                        e.errno, str(e))
            raise SimFatal("zmq.error.ZMQError" if e.errno == errno.EADDRINUSE else "OSError",
                           f"{text} (data parallel master tcp://{self.address}:{self.port})",
                           frames=[(CORE, 1009, "_init_data_parallel", "self.dp_group = "
                                    "vllm_config.parallel_config.stateless_init_dp_group()")])
        s.settimeout(0.2)
        self.listener = s

    def _master_form(self):
        deadline = time.monotonic() + self.timeout
        engine_log.info(WHERE, "DP rank 0 waiting for %d rank(s) on tcp://%s:%d (timeout %gs)",
                        self.size - 1, self.address, self.port, self.timeout)
        threading.Thread(target=self._master_accept_loop, daemon=True).start()
        while True:
            with self._lock:
                joined = len(self.members)
                if joined == self.size - 1:
                    self.formed = True
                    break
            if self.stop.is_set():
                return
            if time.monotonic() > deadline:
                raise SimFatal(
                    "TimeoutError",
                    "Timed out waiting for engines to send initial message on input socket.",
                    frames=[(CORE, 1009, "_init_data_parallel",
                             "self.dp_group = vllm_config.parallel_config.stateless_init_dp_group()")],
                    chained=[("torch.distributed.DistStoreError",
                              f"Timed out after {int(self.timeout) + 1} seconds waiting for clients. "
                              f"{joined + 1}/{self.size} clients joined.")],
                    log_line=(f"DP group did not form: {joined + 1}/{self.size} ranks joined "
                              f"tcp://{self.address}:{self.port} within {self.timeout:g}s"))
            time.sleep(0.05)
        members = {0: {"host": self.my_ip, "api_port": self.api_port}}
        with self._lock:
            for r, (conn, info) in self.members.items():
                members[r] = info
            conns = [(r, c) for r, (c, _i) in self.members.items()]
        msg = (json.dumps({"op": "formed", "dp_size": self.size, "members": members}) + "\n").encode()
        for r, c in conns:
            try:
                c.sendall(msg)
            except OSError:
                pass
            threading.Thread(target=self._watch, args=(r, c), daemon=True).start()
        self.last_step = time.monotonic()
        threading.Thread(target=self._tick_loop, daemon=True).start()
        engine_log.info(WHERE, "DP group formed: %d/%d ranks (%s)", self.size, self.size,
                        ", ".join(f"rank {r}@{m['host']}" for r, m in sorted(members.items())))

    def _master_accept_loop(self):
        while not self.stop.is_set():
            try:
                conn, addr = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._master_handle, args=(conn, addr), daemon=True).start()

    def _master_handle(self, conn, addr):
        try:
            conn.settimeout(10)
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    conn.close()
                    return
                line += chunk
            msg = json.loads(line)
            conn.settimeout(None)
        except (OSError, ValueError):
            conn.close()
            return
        r = msg.get("rank")
        reason = None
        if msg.get("op") != "join" or not isinstance(r, int):
            reason = "bad join message"
        elif msg.get("dp_size") != self.size:
            reason = f"data_parallel_size mismatch: rank {r} has {msg.get('dp_size')}, rank 0 has {self.size}"
        elif not 0 < r < self.size:
            reason = f"invalid data_parallel_rank {r} for data_parallel_size {self.size}"
        with self._lock:
            if reason is None and self.formed:
                reason = "DP group already formed; restart every rank of the group together"
            elif reason is None and r in self.members:
                reason = f"data_parallel_rank {r} already joined from {self.members[r][1]['host']}"
            if reason is None:
                self.members[r] = (conn, {"host": msg.get("host") or addr[0],
                                          "api_port": msg.get("api_port")})
        if reason is not None:
            fatal = "mismatch" in reason or "invalid" in reason
            engine_log.warning(WHERE, "Rejected DP join from %s: %s", addr[0], reason)
            try:
                conn.sendall((json.dumps({"op": "reject", "reason": reason, "fatal": fatal}) + "\n").encode())
            except OSError:
                pass
            conn.close()
            return
        engine_log.info(WHERE, "DP rank %d joined from %s", r, msg.get("host") or addr[0])
        # Before formation, notice a joiner that goes away so it can rejoin.
        if not self.formed:
            threading.Thread(target=self._pre_watch, args=(r, conn), daemon=True).start()

    def _pre_watch(self, r, conn):
        while not self.stop.is_set() and not self.formed:
            try:
                conn.settimeout(0.2)
                data = conn.recv(1, socket.MSG_PEEK)
                if data == b"":
                    with self._lock:
                        if not self.formed and self.members.get(r, (None,))[0] is conn:
                            del self.members[r]
                    conn.close()
                    return
            except socket.timeout:
                continue
            except OSError:
                return
        try:
            conn.settimeout(None)
        except OSError:
            pass

    # ------------------------------------------------------------------ rank > 0
    def _member_form(self):
        deadline = time.monotonic() + self.timeout
        last_reason = "connection refused"
        engine_log.info(WHERE, "DP rank %d joining group at tcp://%s:%d (timeout %gs)",
                        self.rank, self.address, self.port, self.timeout)
        while not self.stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                c = socket.create_connection((self.address, self.port), timeout=min(2.0, remaining))
            except OSError as e:
                last_reason = e.strerror or str(e)
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
                continue
            try:
                c.sendall((json.dumps({"op": "join", "rank": self.rank, "dp_size": self.size,
                                       "host": self.my_ip, "api_port": self.api_port}) + "\n").encode())
                buf = b""
                while b"\n" not in buf:
                    if self.stop.is_set() or time.monotonic() > deadline:
                        raise socket.timeout("connected to rank 0 but the DP group did not form")
                    c.settimeout(0.5)
                    try:
                        chunk = c.recv(4096)
                    except socket.timeout:
                        continue
                    if not chunk:
                        raise OSError("DP master closed the connection")
                    buf += chunk
                line, rest = buf.split(b"\n", 1)
                msg = json.loads(line)
            except (OSError, ValueError) as e:
                last_reason = str(e) or type(e).__name__
                c.close()
                time.sleep(0.2)
                continue
            if msg.get("op") == "formed":
                c.settimeout(None)
                self.members = {0: c}
                self.formed = True
                self.last_step = time.monotonic()
                engine_log.info(WHERE, "DP group formed: rank %d/%d joined master %s:%d",
                                self.rank, self.size, self.address, self.port)
                threading.Thread(target=self._watch, args=(0, c, rest), daemon=True).start()
                return
            c.close()
            last_reason = msg.get("reason", "rejected")
            if msg.get("fatal"):
                raise SimFatal("RuntimeError", f"DP group join rejected by rank 0: {last_reason}",
                               frames=[(CORE, 1009, "_init_data_parallel",
                                        "self.dp_group = vllm_config.parallel_config.stateless_init_dp_group()")])
            engine_log.warning(WHERE, "DP join rejected by rank 0: %s (retrying)", last_reason)
            time.sleep(0.5)
        if self.stop.is_set():
            return
        raise SimFatal(
            "RuntimeError",
            f"Did not receive response from front-end process within {_minutes(self.timeout)} minutes",
            frames=[(CORE, 878, "startup_handshake", "raise RuntimeError(")],
            chained=[("torch.distributed.DistNetworkError",
                      f"The client socket has timed out after {int(self.timeout * 1000)}ms while trying "
                      f"to connect to ({self.address}, {self.port}). Last error: {last_reason}")],
            log_line=(f"DP rank {self.rank} could not join the DP group at tcp://{self.address}:"
                      f"{self.port} within {self.timeout:g}s ({last_reason})"))

    # ------------------------------------------------------------------ common
    def form(self):
        if self.size <= 1:
            self.formed = True
            return
        if self.rank == 0:
            self._master_form()
        else:
            self._member_form()

    def _watch(self, r, conn, buf=b""):
        """Read the lockstep messages of one connection until it ends; then the group lost member r."""
        while not self.stop.is_set():
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self._on_message(r, conn, line)
            try:
                conn.settimeout(0.5)
                data = conn.recv(4096)
                if data == b"":
                    break
            except socket.timeout:
                continue
            except OSError:
                break
            buf += data
        if not self.stop.is_set() and self.on_loss:
            self.on_loss(r)

    def _on_message(self, r, conn, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("op") == "step" and self.rank != 0:
            # a step of the group: rank 0 sends step n only after step n - 1 completed everywhere
            try:
                conn.sendall((json.dumps({"op": "done", "n": msg.get("n")}) + "\n").encode())
            except OSError:
                return
            with self._lock:
                self.seq = msg.get("n") if isinstance(msg.get("n"), int) else self.seq
                self.last_step = time.monotonic()
        elif msg.get("op") == "done" and self.rank == 0:
            with self._lock:
                if msg.get("n") == self.seq:
                    self._pending.discard(r)
                    if not self._pending:
                        self.last_step = time.monotonic()

    def _tick_loop(self):
        """Rank 0: the group's steps, each sent once the previous one completed on every member."""
        while not self.stop.wait(self.interval):
            with self._lock:
                if self._pending:
                    continue
                self.seq += 1
                self._pending = set(self.members)
                conns = [c for c, _info in self.members.values()]
                msg = (json.dumps({"op": "step", "n": self.seq}) + "\n").encode()
            for c in conns:
                try:
                    c.sendall(msg)
                except OSError:
                    pass

    def stalled_for(self):
        """Seconds since the group's last completed step (0 for a group of one)."""
        if self.size <= 1:
            return 0.0
        return time.monotonic() - self.last_step

    def holders(self):
        """The ranks the group waits for (rank 0 knows them; a member does not: "unknown")."""
        with self._lock:
            pending = sorted(self._pending)
        return ", ".join(str(r) for r in pending) if (self.rank == 0 and pending) else "unknown"

    def wait_live(self):
        """Called before each step of request work: returns at once while the group steps; waits while it is
        stalled; raises GroupStalled after the execution timeout (having reported it once through
        on_exec_timeout) or when the engine shuts down meanwhile."""
        if self.size <= 1 or self.stalled_for() <= self.stall_after:
            return
        began = time.monotonic()
        while not self.stop.is_set():
            if self.stalled_for() <= self.stall_after:
                return
            waited = time.monotonic() - began
            if waited >= self.exec_timeout:
                with self._lock:
                    first, self._timed_out = not self._timed_out, True
                if first and self.on_exec_timeout:
                    self.on_exec_timeout(self.holders(), self.seq + 1, waited)
                raise GroupStalled("HCCL execution timeout")
            time.sleep(min(0.1, self.interval))
        raise GroupStalled("the engine is shutting down")

    def close(self):
        for v in list(self.members.values()):
            c = v[0] if isinstance(v, tuple) else v
            try:
                c.close()
            except OSError:
                pass
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
