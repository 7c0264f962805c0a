# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""RouterCore: the control core of the vllm-router engine (--a3-engine vllm-router).

The completions are not relayed here: an edge (haproxy) in front sends them to vllm-router (0.1.17), which
this process starts as its child and keeps fed with the backends. What stays here is every control promise of
the wrapper, on ProbingCore's logic (core.py): the probes of every backend (GET /health), drain and undrain,
/a3/backends, the health decisions, /v1/models (asked of a healthy backend) and /metrics.

* The router's service discovery: it binds a ZMQ ROUTER socket on 127.0.0.1:--a3-router-discovery-port; a
  DEALER socket sends it single-frame msgpack maps {"type": "P" or "D", "http_address": "host:port",
  "zmq_address": "host:port"}. Each message keeps that worker for about 5 s (the router stores expires_at =
  now + 5 in whole seconds and drops a worker once that has passed; it never health-checks workers registered
  this way). So the registrar (the heartbeat task) sends, every HEARTBEAT_S, one message per backend whose
  probes hold it up and that is not drained, and takes a backend out by no longer sending it.
* in_rotation of a backend means "the router may still hold it": a registration of it was sent within
  REGISTERED_FOR (the router's 5 s and a margin). After a drain or a failure it stays true until the router
  has surely dropped it: a rolling restart waits on it before it stops an engine.
* The child: stdout and stderr pass through (docker logs); OPENAI_API_KEY in its environment is the key the
  router sends to the engines (never on its argv, which ps shows). When it exits, the wrapper logs its exit
  status and exits non-zero at once (fatal): docker's restart policy is the supervisor.
* /metrics adds, from two reads of every probe round (the last good read is kept, a failed read drops its
  series): the router's own Prometheus text (the decode backends' active requests, the sum of its
  vllm_router_pd_errors_total as a3_proxy_upstream_errors_total) and, with --a3-edge-stats, the edge's CSV
  statistics (a3_proxy_requests_total of the completions by status class).

msgpack and pyzmq: the encoder of the small maps the router reads is written here (a vLLM image has no msgpack
package); pyzmq (which vLLM itself needs) is imported when the core starts.
"""

import asyncio
import csv
import logging
import os
import re
import signal
import struct
import subprocess
import time

from .answers import client_error, send_json
from .core import ProbingCore, _url_host
from .health import health_decision, public_unavailable

log = logging.getLogger("a3_proxy")

LOCAL = "127.0.0.1"
HEARTBEAT_S = 1.0  # registrations sent per backend, every second: the router holds one for about 5 s
ROUTER_TTL_S = 5.0  # how long the router keeps a worker after its last registration
REGISTERED_FOR = ROUTER_TTL_S + 1.5  # in_rotation after the last registration: the router's 5 s and a margin
CHILD_POLL_S = 0.2  # how often the child's exit is looked for
STOP_GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long
CONNECT_TIMEOUT_S = 1.0  # the check that the router's HTTP port accepts a connection
ROLE_TYPES = {"prefill": "P", "decode": "D"}
# The edge's proxies (haproxy's pxname) of the completions, and the endpoint label they count for.
EDGE_PROXIES = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
EDGE_CLASSES = ("2xx", "3xx", "4xx", "5xx")
NOT_HERE = "completions are served by the proxy's edge, not by this listener"
NO_INSTANCES = ("%s is not available with the vllm-router engine: the backends come from the inventory (drain "
                "and undrain them through /a3/drain and /a3/undrain)")


# ---------------------------------------------------------------------------- msgpack, the little the router reads

def msgpack_str(text):
    """text (str) as a msgpack string: fixstr up to 31 bytes, str8 up to 255, str16 up to 65535."""
    data = text.encode("utf-8")
    if len(data) < 32:
        return bytes([0xa0 | len(data)]) + data
    if len(data) < 256:
        return b"\xd9" + bytes([len(data)]) + data
    if len(data) < 65536:
        return b"\xda" + struct.pack(">H", len(data)) + data
    raise ValueError("a string of %d bytes is longer than this encoder writes" % len(data))


def msgpack_map(mapping):
    """A dict of str -> str as a msgpack map (fixmap up to 15 entries, map16 beyond), in the dict's order."""
    if len(mapping) < 16:
        head = bytes([0x80 | len(mapping)])
    elif len(mapping) < 65536:
        head = b"\xde" + struct.pack(">H", len(mapping))
    else:
        raise ValueError("a map of %d entries is larger than this encoder writes" % len(mapping))
    return head + b"".join(msgpack_str(k) + msgpack_str(v) for k, v in mapping.items())


def http_address(host, port):
    """The router's "host:port" of a backend (an IPv6 address in brackets: the router puts http:// before it)."""
    host = str(host)
    return "%s:%d" % ("[%s]" % host if ":" in host and not host.startswith("[") else host, int(port))


def registration(role, host, port):
    """The registration message of one backend: its role as "P" or "D" and its HTTP address (zmq_address is
    what the router's NIXL-style flow does not use: the HTTP address again)."""
    address = http_address(host, port)
    return msgpack_map({"type": ROLE_TYPES[role], "http_address": address, "zmq_address": address})


def to_register(backends, drained):
    """The backends the registrar keeps in the router: those the probes hold up ("up": an "unknown" backend is not
    registered before its first probe answered) and that are not drained. backends: BackendHealth objects;
    returns them ordered by (role, key)."""
    return sorted((b for b in backends if b.state == "up" and b.key not in drained), key=lambda b: (b.role, b.key))


# ---------------------------------------------------------------------------- the router's child process

def router_argv(options):
    """The router's command line: PD disaggregation with ZMQ discovery, every listener on 127.0.0.1, then the
    --a3-router-arg arguments. No secret ever goes here (ps shows argv): the engines' key is in the env."""
    return [options.a3_router_bin, "--vllm-pd-disaggregation",
            # host:port without tcp:// (the router adds it; with it, its bind fails)
            "--vllm-discovery-address", "%s:%d" % (LOCAL, options.a3_router_discovery_port),
            "--host", LOCAL, "--port", str(options.a3_router_port),
            "--prometheus-host", LOCAL, "--prometheus-port", str(options.a3_router_metrics_port)
            ] + list(options.a3_router_arg or ())


def router_env(environ, backend_api_key):
    """The router's environment: ours, with OPENAI_API_KEY (what the router sends the engines as "Bearer ...")
    set to the engines' key when the secrets give one and removed otherwise (an inherited one is not ours)."""
    env = dict(environ)
    env.pop("OPENAI_API_KEY", None)
    if backend_api_key:
        env["OPENAI_API_KEY"] = backend_api_key
    return env


# ---------------------------------------------------------------------------- what the router and the edge report

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')


def _labels(text):
    found, pos = {}, 0
    text = text or ""
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if not match:
            raise ValueError("cannot read the labels {%s}" % text)
        found[match.group(1)] = re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), match.group(2))
        pos = match.end()
    return found


def prometheus_samples(text):
    """[(name, {label: value}, value)] of a Prometheus text exposition (comments and blank lines skipped).
    Raises ValueError on a line it cannot read."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError("not a Prometheus sample: %s" % line[:200])
        samples.append((match.group(1), _labels(match.group(2)), float(match.group(3))))
    return samples


def parse_router_metrics(text):
    """(errors, active) from the router's /metrics: errors is the sum of vllm_router_pd_errors_total over its
    error_type labels (0 before its first error: the router writes no series then), active is {worker URL
    ("http://host:port"): requests} of vllm_router_pd_active_decode_requests. The router writes one series per
    worker and rank, rank "aggregate" holding the worker's total: that one is taken when it is there, else the
    ranks are summed."""
    errors, ranks, aggregate = 0.0, {}, {}
    for name, labels, value in prometheus_samples(text):
        if name == "vllm_router_pd_errors_total":
            errors += value
        elif name == "vllm_router_pd_active_decode_requests" and "worker" in labels:
            worker = labels["worker"]
            if labels.get("rank") == "aggregate":
                aggregate[worker] = value
            else:
                ranks[worker] = ranks.get(worker, 0.0) + value
    active = dict(ranks)
    active.update(aggregate)
    return errors, dict((w, int(n)) for w, n in active.items())


def engine_running(text):
    """The requests an engine is working on, from its own /metrics: the sum of vllm:num_requests_running (one
    series per model and engine). Raises ValueError when the text has none (not a vLLM engine's /metrics)."""
    found = [value for name, _labels, value in prometheus_samples(text) if name == "vllm:num_requests_running"]
    if not found:
        raise ValueError("no vllm:num_requests_running in the engine's /metrics")
    return int(sum(found))


def parse_edge_stats(text, proxies=None):
    """{(endpoint, "2xx"|"3xx"|"4xx"|"5xx"): n} from haproxy's CSV statistics (show stat, stats;csv): the rows of
    the completions' proxies (EDGE_PROXIES: pxname -> endpoint) with svname BACKEND, their hrsp_2xx ..
    hrsp_5xx columns, found by the header line ("# pxname,svname,..."). Raises ValueError without that header
    or its columns."""
    proxies = EDGE_PROXIES if proxies is None else proxies
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ValueError("not haproxy's CSV statistics: no '# pxname,svname,...' header line")
    reader = csv.reader(lines[1:])
    header = next(csv.reader([lines[0][2:]]))
    wanted = ["pxname", "svname"] + ["hrsp_" + c for c in EDGE_CLASSES]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ValueError("haproxy's CSV statistics have no column %s" % ", ".join(missing))
    index = dict((name, header.index(name)) for name in wanted)
    counts = {}
    for row in reader:
        if len(row) <= max(index.values()) or row[index["svname"]] != "BACKEND":
            continue
        endpoint = proxies.get(row[index["pxname"]])
        if endpoint is None:
            continue
        for cls in EDGE_CLASSES:
            value = row[index["hrsp_" + cls]]
            if value != "":
                counts[(endpoint, cls)] = counts.get((endpoint, cls), 0) + int(value)
    return counts


def _why(exc):
    """A failed read's exception in one line (httpx adds a line with a documentation link to a status error)."""
    text = str(exc).splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "failed")


def _gauge(name, help_text, value, labels=""):
    return ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name, "%s%s %d" % (name, labels, value)]


# ---------------------------------------------------------------------------- the core

class RouterCore(ProbingCore):
    """What both listeners serve from with the vllm-router engine (see the module's text)."""

    engine = "vllm-router"

    def __init__(self, args, options, secrets):
        """args: the upstream script's parsed arguments (its --prefiller-hosts etc.: the backends)."""
        ProbingCore.__init__(self, options, secrets, (("prefill", args.prefiller_instances),
                                                      ("decode", args.decoder_instances)))
        self.registered = {}  # (role, "host:port") -> time.monotonic() of its last registration sent
        self.child = None  # the router's subprocess.Popen
        self.fatal = None  # a future, done with the child's exit status when it exits (server.serve stops then)
        self.router_ready = False  # the child runs and its HTTP port accepts connections
        self.router_errors = None  # sum of vllm_router_pd_errors_total of the last good read, None without one
        self.active_decode = {}  # {"http://host:port": active requests} of the last good read of the router
        self.prefill_running = {}  # {"host:port": vllm:num_requests_running} of each prefill's last good read
        self._prefill_read_failing = set()  # prefills whose last /metrics read failed (logged once)
        self.router_read_ok = False
        self.edge_requests = None  # {(endpoint, class): n} of the last good read of the edge's statistics
        self.edge_read_ok = None if not options.a3_edge_stats else False
        self._socket = None
        self._zmq_context = None
        self._heartbeat = None
        self._watcher = None
        self._send_failing = False

    # ------------------------------------------------------------------ rotation: what the router holds
    def in_rotation(self, backend):
        """The router may still hold the backend: a registration of it was sent within REGISTERED_FOR."""
        sent = self.registered.get((backend.role, backend.key))
        return sent is not None and time.monotonic() - sent < REGISTERED_FOR

    def inflight(self, backend):
        """A decode backend's requests in the router (its vllm_router_pd_active_decode_requests), a prefill's in the
        engine itself (its vllm:num_requests_running: the router keeps no count of requests open on a prefill), as
        of the last probe round. A drained backend the router may still hold (in_rotation) counts one more: the
        router can still choose it for a new request until its registration runs out, so whoever waits for a
        drained backend to have no request (the rolling restart) waits for that too."""
        if backend.role == "decode":
            active = self.active_decode.get("http://" + http_address(backend.host, backend.port), 0)
        else:
            active = self.prefill_running.get(backend.key, 0)
        if backend.key in self.drained and self.in_rotation(backend):
            active += 1
        return active

    def _apply(self, backend, action):
        """The registrar follows the probes: nothing to call, the next heartbeat sends the backend or leaves it
        out."""
        self.count("a3_proxy_rotation_changes_total")
        if action == "remove":
            log.warning("%s backend %s: taken out of the rotation: %s (no more registrations: the router drops it "
                        "within %gs)", backend.role, backend.key, backend.last_change_reason, ROUTER_TTL_S)
        else:
            log.warning("%s backend %s: back in the rotation: %s", backend.role, backend.key,
                        backend.last_change_reason)

    def heartbeat(self):
        """Send one registration of every backend to keep in the router (to_register); returns the keys sent.
        A failed send is logged once (the router may be restarting), and tried again at the next beat."""
        sent = []
        for backend in to_register(self.backends.values(), self.drained):
            try:
                self._send(registration(backend.role, backend.host, backend.port))
            except Exception as exc:  # zmq.Again (no connection to the router yet), zmq.ZMQError
                if not self._send_failing:
                    log.warning("cannot register the backends with the router (127.0.0.1:%d): %s: %s; retrying "
                                "every %gs", self.opt.a3_router_discovery_port, type(exc).__name__, exc, HEARTBEAT_S)
                self._send_failing = True
                return sent
            self.registered[(backend.role, backend.key)] = time.monotonic()
            sent.append(backend.key)
        if self._send_failing:
            log.warning("registrations reach the router again")
            self._send_failing = False
        return sent

    def _send(self, message):
        import zmq
        self._socket.send(message, zmq.NOBLOCK)

    async def check_router(self):
        """Whether the child runs and its HTTP port accepts a connection (its /health says 503 while it holds no
        worker, so it is not asked)."""
        if self.child is None or self.child.poll() is not None:
            ready = False
        else:
            try:
                _reader, writer = await asyncio.wait_for(asyncio.open_connection(LOCAL, self.opt.a3_router_port),
                                                         CONNECT_TIMEOUT_S)
                writer.close()
                ready = True
            except (OSError, asyncio.TimeoutError):
                ready = False
        if ready != self.router_ready:
            log.info("the router %s on 127.0.0.1:%d", "accepts connections" if ready else "does not accept connections",
                     self.opt.a3_router_port)
        self.router_ready = ready
        return ready

    async def _heartbeat_loop(self):
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                if await self.check_router():
                    self.heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")
            await asyncio.sleep(max(0.05, HEARTBEAT_S - (loop.time() - started)))

    # ------------------------------------------------------------------ the reads of a probe round
    def side_reads(self):
        return ProbingCore.side_reads(self) + [self.read_router_metrics(), self.read_edge_stats(),
                                               self.read_prefill_running()]

    async def read_prefill_running(self):
        """Every prefill engine's own count of the requests it works on (its /metrics, which vLLM leaves open with
        an API key). A failed read drops the backend's count (0) and is logged once until a read succeeds."""
        prefills = [b for b in self.backends.values() if b.role == "prefill"]

        async def one(backend):
            url = "http://%s:%d/metrics" % (_url_host(backend.host), backend.port)
            try:
                running = engine_running(await self._get_text(url))
            except Exception as exc:  # a read that fails for any reason is reported the same way
                if backend.key not in self._prefill_read_failing:
                    log.warning("prefill backend %s: cannot read its open requests (%s): %s", backend.key, url,
                                _why(exc))
                self._prefill_read_failing.add(backend.key)
                self.prefill_running.pop(backend.key, None)
                return
            self._prefill_read_failing.discard(backend.key)
            self.prefill_running[backend.key] = running

        await asyncio.gather(*(one(b) for b in prefills))

    async def _get_text(self, url):
        response = await asyncio.wait_for(self._probe_client.get(url), self.opt.a3_probe_timeout + 0.5)
        response.raise_for_status()
        return response.text

    async def read_router_metrics(self):
        url = "http://%s:%d/metrics" % (LOCAL, self.opt.a3_router_metrics_port)
        try:
            errors, active = parse_router_metrics(await self._get_text(url))
        except Exception as exc:  # a read that fails for any reason is reported the same way
            if self.router_read_ok:
                log.warning("cannot read the router's metrics (%s): %s", url, _why(exc))
            self.router_read_ok, self.router_errors, self.active_decode = False, None, {}
            return
        self.router_read_ok, self.router_errors, self.active_decode = True, errors, active

    async def read_edge_stats(self):
        url = self.opt.a3_edge_stats
        if not url:
            return
        try:
            counts = parse_edge_stats(await self._get_text(url))
        except Exception as exc:  # a read that fails for any reason is reported the same way
            if self.edge_read_ok is not False or self.edge_requests is not None:
                log.warning("cannot read the edge's statistics (%s): %s", url, _why(exc))
            self.edge_read_ok, self.edge_requests = False, None
            return
        self.edge_read_ok, self.edge_requests = True, counts

    # ------------------------------------------------------------------ the child
    async def start(self):
        """Start the router, the registrar and the prober."""
        import zmq
        self.fatal = asyncio.get_running_loop().create_future()
        self._zmq_context = zmq.Context()
        self._socket = self._zmq_context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        # queue nothing while no connection to the router is up: a registration queued then would reach a
        # router that starts later, after the backend may have been drained
        self._socket.setsockopt(zmq.IMMEDIATE, 1)
        self._socket.connect("tcp://%s:%d" % (LOCAL, self.opt.a3_router_discovery_port))
        argv = router_argv(self.opt)
        log.info("starting the router: %s (engines' key: %s)", " ".join(argv),
                 "set" if self.secrets.backend_api_key else "none")
        self.child = subprocess.Popen(argv, env=router_env(os.environ, self.secrets.backend_api_key),
                                      stdin=subprocess.DEVNULL)
        self._watcher = asyncio.ensure_future(self._watch_child())
        self._heartbeat = asyncio.ensure_future(self._heartbeat_loop())
        self._start_probing()
        log.info("probing %d backends every %gs (timeout %gs, %d failures take one out of the rotation); "
                 "registering those in rotation with the router every %gs; etcd %s; edge statistics %s",
                 len(self.backends), self.opt.a3_probe_interval, self.opt.a3_probe_timeout,
                 self.opt.a3_fail_threshold, HEARTBEAT_S, self.etcd.base_url if self.etcd else "not read",
                 self.opt.a3_edge_stats or "not read")

    async def _watch_child(self):
        while self.child.poll() is None:
            await asyncio.sleep(CHILD_POLL_S)
        code = self.child.returncode
        self.router_ready = False
        log.error("the router (pid %d) exited with status %s: the proxy stops (its restart policy starts it again)",
                  self.child.pid, code)
        if self.fatal is not None and not self.fatal.done():
            self.fatal.set_result(code)

    async def stop(self):
        for task in (self._watcher, self._heartbeat):
            if task is not None:
                task.cancel()
                try:
                    await task
                except BaseException:
                    pass
        await self._stop_probing()
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            while self.child.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if self.child.poll() is None:
                log.warning("the router did not stop within %gs of SIGTERM: SIGKILL", STOP_GRACE_S)
                self.child.kill()
            self.child.wait()
        if self.child is not None:  # it may have had the signal itself (docker stop, a process group's)
            log.info("the router stopped (status %s)", self.child.returncode)
        if self._socket is not None:
            self._socket.close(0)
            self._zmq_context.term()
            self._socket = self._zmq_context = None

    # ------------------------------------------------------------------ answers
    def _router_problem(self):
        """Why the router cannot take completions (None when it can): not started, exited, or its port does not
        accept connections yet."""
        if self.child is None:
            return "the router is not started"
        if self.child.poll() is not None:
            return "the router exited (status %s)" % self.child.returncode
        if not self.router_ready:
            return "the router does not accept connections on 127.0.0.1:%d yet" % self.opt.a3_router_port
        return None

    def full_health(self):
        status, body = health_decision(self.snapshots())
        why = self._router_problem()
        if why is None:
            return status, body
        missing = ["router"] + list(body.get("missing", []))
        message = why + ("; " + body["message"] if body.get("message") else "")
        return 503, dict(body, status="unavailable", missing=missing, message=message)

    def public_health(self):
        status, body = self.full_health()
        if status == 200:
            return 200, {"status": "ok"}
        roles = [m for m in body["missing"] if m != "router"]
        message = "the proxy's router is not running yet" if "router" in body["missing"] else ""
        if roles:
            message = (message + "; " if message else "") + public_unavailable(roles)
        elif message:
            message += "; retry later"
        return 503, {"status": "unavailable", "missing": body["missing"], "message": message}

    def metrics_text(self):
        from .metrics import render_metrics
        requests = dict(self.requests)
        for key, n in (self.edge_requests or {}).items():
            requests[key] = requests.get(key, 0) + n
        counters = dict(self.counters)
        own = counters.get("a3_proxy_upstream_errors_total", 0)
        counters["a3_proxy_upstream_errors_total"] = None if self.router_errors is None else own + int(
            self.router_errors)
        extra = _gauge("a3_proxy_engine_info", "The engine that relays the completions.", 1,
                       '{engine="%s"}' % self.engine)
        extra += _gauge("a3_proxy_router_up", "1 while the vllm-router child runs and accepts connections, else 0.",
                        1 if self._router_problem() is None else 0)
        extra += _gauge("a3_proxy_router_metrics_read_ok", "1 when the last read of the router's metrics worked.",
                        1 if self.router_read_ok else 0)
        if self.edge_read_ok is not None:
            extra += _gauge("a3_proxy_edge_stats_read_ok", "1 when the last read of the edge's statistics worked.",
                            1 if self.edge_read_ok else 0)
        return render_metrics(requests, self.snapshots(), counters, self.started, self.ds_workers, self.etcd_ok,
                              self.admission.open, extra)

    async def completion(self, scope, body, receive, send):
        """Never reached behind the edge (it sends the completions to the router); a client that comes here
        directly gets 404."""
        self.count("a3_proxy_not_found_total")
        await send_json(send, 404, client_error(404, NOT_HERE))

    async def instances(self, scope, body, receive, send):
        """/instances/add and /instances/remove: 404, the backends come from the inventory."""
        self.count("a3_proxy_not_found_total")
        await send_json(send, 404, client_error(404, NO_INSTANCES % scope.get("path", "/instances")))
