# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""ProbingCore, what every engine's core shares (the prober, drain, the health decisions, /v1/models, /metrics),
and HonestProxy: the core of the upstream engine, the state both listeners serve from around the upstream's
ProxyState (router.RouterCore is the vllm-router engine's).

* A prober: every backend (prefill and decode) gets GET /health every --a3-probe-interval seconds. After
  --a3-fail-threshold consecutive failed probes a backend leaves the upstream rotation (through the upstream's
  own remove_prefillers/remove_decoders); when /health answers 200 again it comes back (through its
  add_prefillers/add_decoders). Every change is logged with its reason.
* Completions never give an empty or meaningless 200: no healthy backend -> 503 at once; an upstream failure
  -> 502 with an OpenAI-style error body; no first byte within --a3-first-byte-timeout -> 503 (the upstream
  request is cancelled); nothing for --a3-idle-timeout after the first byte -> a stream ends with an SSE error
  event and "data: [DONE]", a non-stream answer gets 504; a stream cut midway ends the same way. A backend's 4xx
  goes to the client as it is, once (see engine). A client's kv_transfer_params are dropped.
* Drain for maintenance: POST /a3/drain {"backends": ["host:port", ...]} keeps those backends out of the
  selection (new requests go to the others, chosen by the upstream's least-load rule; what the drained ones
  are serving finishes) until POST /a3/undrain with the same body. A drain survives the backend's restart
  (the prober does not put it back); every backend of a role drained means 503 for clients, as when none is
  healthy. /a3/backends shows each backend's "drained" flag, "inflight_requests" (client requests still open
  that the upstream sent, or chose to send, to that backend) and "outstanding_load" (the upstream's own count,
  which the ledger releases at every request's end, whatever way it ended).
* Client texts never carry an internal address (host:port, URL): the logs do.
"""

import asyncio
import logging
import time

from . import ROLES
from .answers import (DoneTracker, backend_error_answer, classify_answer, client_error, forwardable_request,
                      is_json_error, json_or_none, scrub_addresses, scrub_body, send_bytes, send_json, snippet,
                      sse_error_tail)
from .engine import (BackendAnswer, RequestState, Upstream, current_request, exc_text, find_exception, forward_scope,
                     install_hooks, status_error_answer)
from .etcd import ds_range_request, ds_worker_states, etcd_ssl_context, read_failure_text, try_order
from .health import (BackendHealth, backend_key, culprit, health_decision, public_health, public_unavailable,
                     retried_mid_stream, usable)
from .limits import Admission
from .metrics import render_metrics
from .rotation import choose_undrained, index_of, outstanding_load, parse_backend_list

log = logging.getLogger("a3_proxy")

# Seconds GET /v1/models may take on one backend.
MODELS_TIMEOUT = 10.0
RELEASES = (("prefill", "release_prefiller", "tokens"), ("prefill", "release_prefiller_kv", "kv"),
            ("decode", "release_decoder", "tokens"))


def _url_host(host):
    return "[%s]" % host if ":" in host else host


class ProbingCore(object):
    """What every engine's core shares, and both listeners serve from: the prober's view of the backends
    (BackendHealth), drain, the health decisions, /v1/models, the counters and /metrics. A subclass says what
    "in rotation" means (in_rotation), applies the prober's changes to its engine (_apply) and starts and stops
    the prober with its engine (start, stop)."""

    engine = "engine"  # what the log calls the engine: "the <engine>'s remove failed"

    def __init__(self, options, secrets, instances):
        """instances: ((role, ((host, port), ...)), ...): the backends of the command line."""
        self.opt = options
        self.secrets = secrets
        self.backends = {}  # (role, "host:port") -> BackendHealth
        self.drained = set()  # "host:port" of the backends drained for maintenance
        self.requests = {}
        self.counters = {}
        self.admission = Admission(options.a3_max_inflight)
        self._wake = None
        self._prober = None
        self._probe_client = None
        self._api_client = None
        self._etcd_client = None
        self.retry_after = [(b"retry-after", str(options.a3_retry_after).encode())]
        self.ds_workers = None  # {worker: 1/0} of the last good read of etcd, None before the first one
        self.etcd = options.a3_etcd_endpoint  # --a3-etcd's EtcdEndpoints as cli.split_argv checked them, or None
        self.etcd_ok = None if not self.etcd else False
        self.etcd_last_good = None  # the index in self.etcd of the endpoint that answered the last read
        now = time.time()
        self.started = now
        for role, listed in instances:
            for host, port in listed:
                self._track(role, host, port, now, "listed on the command line")

    # ------------------------------------------------------------------ bookkeeping
    def _track(self, role, host, port, now, reason):
        key = (role, backend_key(host, port))
        if key not in self.backends:
            self.backends[key] = BackendHealth(role, host, port, self.opt.a3_fail_threshold, now, reason)
        return self.backends[key]

    def count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def count_request(self, endpoint, code):
        self.requests[(endpoint, str(code))] = self.requests.get((endpoint, str(code)), 0) + 1

    def hosts(self):
        """Every internal host name or address the proxy knows: what scrub_addresses hides from clients."""
        found = set(b.host for b in self.backends.values())
        found.update(w.rsplit(":", 1)[0].strip("[]") for w in (self.opt.a3_ds_worker or []))
        if self.etcd:
            found.update(self.etcd.hosts)
        return found

    def scrub(self, text):
        return scrub_addresses(text, self.hosts())

    def in_rotation(self, backend):
        raise NotImplementedError

    def _load(self, backend):
        """The engine's own load count of this backend (0 where the engine has none)."""
        return 0.0

    def inflight(self, backend):
        """Client requests open on this backend (0 where the engine does not say)."""
        return 0

    def snapshots(self, counts=True):
        """Every backend's snapshot; without counts, its load and in-flight requests are left at 0 (counting them
        walks every open request: the health decision of each completion does without)."""
        return [b.snapshot(self.in_rotation(b), b.key in self.drained, self._load(b) if counts else 0.0,
                           self.inflight(b) if counts else 0)
                for b in self.backends.values()]

    # ------------------------------------------------------------------ prober
    async def _probe(self, backend):
        import httpx
        url = "http://%s:%d/health" % (_url_host(backend.host), backend.port)
        timeout = self.opt.a3_probe_timeout
        try:
            response = await asyncio.wait_for(self._probe_client.get(url), timeout + 0.5)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            return False, "no answer within %gs" % timeout
        except httpx.HTTPError as exc:
            return False, "%s: %s" % (type(exc).__name__, str(exc) or "connection failed")
        except OSError as exc:
            return False, "%s: %s" % (type(exc).__name__, exc)
        if response.status_code == 200:
            return True, "HTTP 200"
        return False, "HTTP %d" % response.status_code

    async def read_ds_workers(self):
        """One read of the workers' registrations in etcd (only with --a3-etcd). The endpoints are tried one after
        the other, the one that answered last first, each within its share of the probe timeout; the first answer
        is the read's. A read none answered keeps no stale states: the series disappear and a3_proxy_etcd_read_ok drops
        to 0 (etcd's own alert says the rest)."""
        if not self.etcd:
            return
        failures = []
        # the read is one of the probe round's, which waits for it: the members share one probe timeout (a single
        # etcd gets all of it), so members that hang cannot stretch the round
        attempt_timeout = (self.opt.a3_probe_timeout + 0.5) / len(self.etcd)
        for index in try_order(self.etcd, self.etcd_last_good):
            endpoint = self.etcd[index]
            try:
                response = await asyncio.wait_for(
                    self._etcd_client.post(endpoint.base_url + "/v3/kv/range", json=ds_range_request()),
                    attempt_timeout)
                response.raise_for_status()
                states = ds_worker_states(response.json(), self.opt.a3_ds_worker)
            except Exception as exc:  # a read that fails for any reason is reported the same way
                # one endpoint's error names its URL; several are named by read_failure_text
                failures.append((endpoint, exc_text(exc, where=len(self.etcd) == 1)))
                continue
            break
        else:
            if self.etcd_ok is not False:
                log.warning("etcd %s: cannot read the datasystem workers' registrations: %s",
                            ",".join(e.base_url for e, _unused in failures), read_failure_text(failures))
            self.etcd_ok, self.ds_workers = False, None
            return
        if failures:
            log.info("etcd %s answered the read after %s failed: %s", endpoint.base_url,
                     ",".join(e.base_url for e, _unused in failures), read_failure_text(failures))
        self.etcd_last_good = index
        missing = sorted(w for w, up in states.items() if not up)
        if missing and missing != sorted(w for w, up in (self.ds_workers or {}).items() if not up):
            log.warning("datasystem workers not registered and ready in etcd: %s", ", ".join(missing))
        self.etcd_ok, self.ds_workers = True, states

    def side_reads(self):
        """The reads of a probe round besides the probes (coroutines that keep their own results): etcd's."""
        return [self.read_ds_workers()]

    async def probe_round(self):
        self._discover()
        backends = list(self.backends.values())
        reads = self.side_reads()
        results = (await asyncio.gather(*reads, *(self._probe(b) for b in backends)))[len(reads):]
        now = time.time()
        for backend, (ok, detail) in zip(backends, results):
            before = backend.state
            action = backend.observe(ok, detail, now)
            if action is not None:
                try:
                    self._apply(backend, action)
                except Exception:
                    log.exception("%s backend %s: the %s's %s failed", backend.role, backend.key, self.engine, action)
                continue
            if backend.state != before:
                log.info("%s backend %s: %s -> %s: %s", backend.role, backend.key, before, backend.state,
                         backend.last_change_reason)
            elif not ok and backend.state != "down":
                log.warning("%s backend %s: probe failed (%d of %d before it leaves the rotation): %s",
                            backend.role, backend.key, backend.failures, backend.threshold, detail)
            self._reconcile(backend)

    async def _probe_loop(self):
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            self._wake.clear()
            try:
                await self.probe_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("probe round failed")
            wait = max(0.2, self.opt.a3_probe_interval - (loop.time() - started))
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
                await asyncio.sleep(0.2)  # a request asked for an early round: not more than 5 a second
            except asyncio.TimeoutError:
                pass

    def suspect(self, trace, why):
        """A request failed or timed out: note it on the backend it was waiting on (culprit()), and probe
        now rather than at the next interval. Returns (who, role): "<role> backend <host:port>" for the log
        ("" if unknown) and the role(s) alone for the client ("" if unknown)."""
        key = culprit(trace)
        found = [b for b in self.backends.values() if b.key == key]
        who = " or ".join("%s backend %s" % (b.role, b.key) for b in found) or ("backend %s" % key if key else "")
        role = " or ".join(sorted(set(b.role for b in found)))
        for backend in found:
            backend.request_failed(why, time.time())
        log.warning("request failed (%s)%s: probing the backends now", why, (", waiting on " + who) if who else "")
        if self._wake is not None:
            self._wake.set()
        return who, ("the %s backend" % role if role else "")

    def _role_of(self, key):
        roles = set(b.role for b in self.backends.values() if b.key == key)
        return roles.pop() if len(roles) == 1 else None

    # ------------------------------------------------------------------ what an engine does with the prober's view
    def _discover(self):
        """Track the backends the engine learnt of since the last round (none by default)."""

    def _apply(self, backend, action):
        """Apply the prober's action (\"remove\" or \"add\", from BackendHealth.observe) to the engine."""
        raise NotImplementedError

    def _reconcile(self, backend):
        """After a round without a change of the backend's state: make the engine agree with it (nothing by
        default)."""

    # ------------------------------------------------------------------ start and stop
    def _start_probing(self):
        """Make the HTTP clients and start the probe loop (on the running event loop)."""
        import httpx
        self._probe_client = httpx.AsyncClient(timeout=httpx.Timeout(self.opt.a3_probe_timeout), trust_env=False,
                                               limits=httpx.Limits(max_keepalive_connections=0))
        self._api_client = httpx.AsyncClient(timeout=httpx.Timeout(MODELS_TIMEOUT), trust_env=False)
        self._etcd_client = self._probe_client
        if self.etcd and self.etcd.scheme == "https":
            context = etcd_ssl_context(self.opt.a3_etcd_ca, self.opt.a3_etcd_cert, self.opt.a3_etcd_key)
            self._etcd_client = httpx.AsyncClient(timeout=httpx.Timeout(self.opt.a3_probe_timeout), trust_env=False,
                                                  verify=context, limits=httpx.Limits(max_keepalive_connections=0))
        self._wake = asyncio.Event()
        self._prober = asyncio.ensure_future(self._probe_loop())

    async def _stop_probing(self):
        """Stop the probe loop and close the HTTP clients (nothing when they were never started)."""
        if self._prober is not None:
            self._prober.cancel()
            try:
                await self._prober
            except BaseException:
                pass
        for client in set(c for c in (self._probe_client, self._api_client, self._etcd_client) if c is not None):
            await client.aclose()

    def header_timed_out(self, client):
        self.count("a3_proxy_header_timeouts_total")
        log.warning("connection from %s closed: its request headers did not come within %gs",
                    "%s:%s" % tuple(client) if client else "?", self.opt.a3_header_timeout)

    # ------------------------------------------------------------------ admin answers
    def full_health(self):
        return health_decision(self.snapshots())

    def public_health(self):
        return public_health(self.snapshots())

    def backends_answer(self):
        return sorted(self.snapshots(), key=lambda s: (s["role"], s["backend"]))

    def metrics_text(self):
        return render_metrics(self.requests, self.snapshots(), self.counters, self.started, self.ds_workers,
                              self.etcd_ok, self.admission.open)

    async def drain(self, path, body, send):
        try:
            names = parse_backend_list(body, [b.key for b in self.backends.values()])
        except ValueError as exc:
            return await send_json(send, 400, client_error(400, str(exc)))
        drain = path == "/a3/drain"
        changed = sorted(set(names) - self.drained) if drain else sorted(set(names) & self.drained)
        if drain:
            self.drained.update(names)
        else:
            self.drained.difference_update(names)
        if changed:
            self.count("a3_proxy_rotation_changes_total", len(changed))
            log.warning("%s %s", "drained for maintenance (kept out of the selection):" if drain else
                        "undrained (back in the selection):", ", ".join(changed))
        return await send_json(send, 200, {"drained": sorted(self.drained), "changed": changed, "backends": sorted(
            (s for s in self.snapshots() if s["backend"] in names), key=lambda s: (s["role"], s["backend"]))})

    # ------------------------------------------------------------------ public answers
    async def error(self, send, endpoint, code, message, headers=()):
        """An error answer to a client of the public listener (its text scrubbed of internal addresses)."""
        if endpoint:
            self.count_request(endpoint, code)
        await send_json(send, code, client_error(code, self.scrub(message)), headers)

    async def models(self, send):
        """GET /v1/models, asked of a healthy backend in rotation (decode first), with the backend key."""
        endpoint = "/v1/models"
        usable_snaps = sorted((s for s in self.snapshots() if usable(s)),
                              key=lambda s: (s["role"] != "decode", s["inflight_requests"], s["backend"]))
        if not usable_snaps:
            self.count("a3_proxy_no_backend_total")
            return await self.error(send, endpoint, 503, "no healthy backend in rotation to list the models; retry "
                                    "later", self.retry_after)
        headers = {"Authorization": "Bearer " + self.secrets.backend_api_key} if self.secrets.backend_api_key else {}
        for snap in usable_snaps[:3]:
            backend = self.backends[(snap["role"], snap["backend"])]
            url = "http://%s:%d/v1/models" % (_url_host(backend.host), backend.port)
            try:
                response = await self._api_client.get(url, headers=headers)
            except Exception as exc:  # httpx's errors, a refused connection
                log.warning("/v1/models: %s backend %s: %s", backend.role, backend.key, exc_text(exc))
                continue
            if response.status_code == 200 and isinstance(json_or_none(response.content), dict):
                self.count_request(endpoint, 200)
                return await send_bytes(send, 200, scrub_body(response.content, self.hosts()), b"application/json")
            log.warning("/v1/models: %s backend %s answered HTTP %d: %s", backend.role, backend.key,
                        response.status_code, snippet(response.content, 200))
        self.count("a3_proxy_upstream_errors_total")
        return await self.error(send, endpoint, 502, "no healthy backend answered the model list")


class HonestProxy(ProbingCore):
    """The core of the upstream engine: the upstream's ProxyState is the rotation (the prober takes backends out
    and puts them back through its own add/remove), selection, forwarding of the completions."""

    engine = "upstream"

    def __init__(self, upstream, options, secrets):
        self.up = upstream
        self.open = set()  # the RequestState of every completion still open
        self._lifespan_cm = None
        self._release = {}  # (role, kind) -> the upstream's release method
        install_hooks(upstream, secrets.backend_api_key)
        args = upstream.global_args
        ProbingCore.__init__(self, options, secrets, (("prefill", args.prefiller_instances),
                                                      ("decode", args.decoder_instances)))

    # ------------------------------------------------------------------ the upstream's rotation
    def _lists(self, role):
        state = self.up.proxy_state
        if state is None:
            return [], []
        if role == "prefill":
            return list(state.prefillers), list(state.tainted_prefillers)
        return list(state.decoders), list(state.tainted_decoders)

    def in_rotation(self, backend):
        servers, tainted = self._lists(backend.role)
        return (any(str(s) == backend.key for s in servers)
                and not any(str(s) == backend.key for s in tainted))

    def _load(self, backend):
        servers, _unused = self._lists(backend.role)
        return sum(outstanding_load(s, backend.role) for s in servers if str(s) == backend.key)

    def inflight(self, backend):
        """Client requests still open that the upstream selected this backend for."""
        return sum(1 for state in self.open if backend.key in state.ledger.backends())

    # ------------------------------------------------------------------ the upstream's selection and its load counts
    def _pin_selection(self):
        """While a backend is drained, the upstream's select_prefiller/select_decoder (replaced on its
        ProxyState instance) choose among the others (choose_undrained) and book the load the way the
        upstream does; with nothing drained, or nothing else left, the upstream selects as it always does.
        Either way the booking goes into the request's ledger, and the upstream's releases are matched
        against it (see rotation.LoadLedger): what is left when the request ends is released then."""
        state = self.up.proxy_state
        for role, name in (("prefill", "select_prefiller"), ("decode", "select_decoder")):
            def select(score, _original=getattr(state, name), _role=role):
                servers = state.prefillers if _role == "prefill" else state.decoders
                index = None
                if self.drained:
                    _unused, tainted = self._lists(_role)
                    index = choose_undrained(servers, self.drained, tainted, _role)
                if index is None:
                    index = _original(score)
                else:
                    server = servers[index]
                    server.active_tokens += score
                    if _role == "prefill":
                        server.active_kv_cache += score
                        state._update_prefiller_priority(index)
                    else:
                        state._update_decoder_priority(index)
                request = current_request()
                if request is not None and 0 <= index < len(servers):
                    request.ledger.book(_role, servers[index], score, score if _role == "prefill" else 0.0)
                return index
            setattr(state, name, select)
        for role, name, kind in RELEASES:
            self._release[(role, kind)] = getattr(state, name)

            def release(idx, count, _original=getattr(state, name), _role=role, _kind=kind):
                request = current_request()
                if request is None:
                    return _original(idx, count)
                server, amount = request.ledger.release(_role, _kind, count)
                if server is not None:
                    self._apply_release(_role, _kind, server, amount)
                return None
            setattr(state, name, release)

    def _apply_release(self, role, kind, server, amount):
        """Release amount of kind on this server object: through the upstream's own release (which updates its
        heap) while the server is in its list, on the object itself once it left."""
        servers = self.up.proxy_state.prefillers if role == "prefill" else self.up.proxy_state.decoders
        index = index_of(servers, server)
        if index is not None:
            self._release[(role, kind)](index, amount)
        elif kind == "tokens":
            server.active_tokens -= amount
        elif server.active_kv_cache > 0:
            server.active_kv_cache -= amount

    def _settle(self, request, aborted):
        """The request is over: release what the upstream booked for it and did not release. aborted: the
        client got no answer from a decode, so a prefill whose KV was never pulled is told to free it (the
        upstream's own abort, sent with that prefill's next request)."""
        state = self.up.proxy_state
        for role, server, tokens, kv in request.ledger.settle():
            self.count("a3_proxy_load_released_total")
            if tokens > 0:
                self._apply_release(role, "tokens", server, tokens)
            if kv > 0:  # only a prefill holds KV for a request
                self._apply_release(role, "kv", server, kv)
                index = index_of(state.prefillers, server)
                if aborted and index is not None:
                    for rid in sorted(request.request_ids.get(str(server), ())):
                        state.abort_prefiller_request(index, rid)

    def _discover(self):
        """Backends added to the upstream through /instances/add are probed too."""
        now = time.time()
        for role in ROLES:
            for server in self._lists(role)[0]:
                self._track(role, server.host, server.port, now, "found in the upstream rotation (/instances/add)")

    # ------------------------------------------------------------------ rotation (the upstream's own add/remove)
    def _remove(self, backend, reason):
        state = self.up.proxy_state
        servers, _unused = self._lists(backend.role)
        found = [s for s in servers if str(s) == backend.key]
        if not found:
            log.warning("%s backend %s: leaves the rotation (%s); it was not in the upstream rotation",
                        backend.role, backend.key, reason)
            return
        remove = state.remove_prefillers if backend.role == "prefill" else state.remove_decoders
        waiting = remove(found)
        self.count("a3_proxy_rotation_changes_total")
        log.warning("%s backend %s: taken out of the rotation: %s%s", backend.role, backend.key, reason,
                    " (requests in flight: the upstream marks it and removes it once they are done)" if waiting else "")

    def _add(self, backend, reason):
        # The upstream's add_prefillers/add_decoders (what its /instances/add ends in), called directly:
        # its add_instances first asks GET /v1/models through a client without a timeout (a hung backend
        # would block the prober) and parks a failing backend with a thread that retries it. The probe has
        # just seen /health answer 200, which is the check that counts here.
        state = self.up.proxy_state
        server = self.up.ServerState(backend.host, backend.port)
        add = state.add_prefillers if backend.role == "prefill" else state.add_decoders
        add([server])
        servers, _unused = self._lists(backend.role)
        if not any(s is server for s in servers):  # it was only marked for removal: the old entry is kept
            asyncio.ensure_future(server.client.aclose())
        self.count("a3_proxy_rotation_changes_total")
        log.warning("%s backend %s: back in the rotation: %s", backend.role, backend.key, reason)

    def _apply(self, backend, action):
        if action == "remove":
            self._remove(backend, backend.last_change_reason)
        elif action == "add":
            self._add(backend, backend.last_change_reason)

    def _reconcile(self, backend):
        """A backend the probes hold down must not be in the upstream rotation (someone may have added it
        back through /instances/add). A healthy backend removed through /instances/remove stays out."""
        if backend.state == "down" and self.in_rotation(backend):
            self._remove(backend, "still in the upstream rotation while its probes fail")

    # ------------------------------------------------------------------ start, stop and the upstream's own answers
    async def start(self):
        """Run the upstream's lifespan (its ProxyState and backend clients), then start probing."""
        self._lifespan_cm = self.up.app.router.lifespan_context(self.up.app)
        await self._lifespan_cm.__aenter__()
        self._discover()
        self._pin_selection()
        self._start_probing()
        log.info("probing %d backends every %gs (timeout %gs, %d failures take one out of the rotation); "
                 "first-byte timeout %gs, idle timeout %gs; etcd %s", len(self.backends), self.opt.a3_probe_interval,
                 self.opt.a3_probe_timeout, self.opt.a3_fail_threshold, self.opt.a3_first_byte_timeout,
                 self.opt.a3_idle_timeout, self.etcd.base_url if self.etcd else "not read")

    async def stop(self):
        await self._stop_probing()
        if self._lifespan_cm is not None:
            try:
                await self._lifespan_cm.__aexit__(None, None, None)
            except Exception:
                log.exception("the upstream's shutdown failed")

    async def instances(self, scope, body, receive, send):
        """The upstream's own /instances/add and /instances/remove (admin listener only)."""
        first = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def replay():
            return next(first, None) or await receive()

        await self.up.app(forward_scope(scope, body), replay, send)

    async def completion(self, scope, body, receive, send):
        endpoint = scope["path"]
        status, health = health_decision(self.snapshots(counts=False))
        if status != 200:
            self.count("a3_proxy_no_backend_total")
            log.warning("%s: 503 at once: %s", endpoint, health["message"])
            return await self.error(send, endpoint, 503, public_unavailable(health["missing"]), self.retry_after)
        request, body, dropped = forwardable_request(body)
        if request is None:
            return await self.error(send, endpoint, 400, "the request body must be a JSON object")
        if dropped:
            self.count("a3_proxy_kv_transfer_params_dropped_total")
            log.info("%s: the client's kv_transfer_params were dropped (the proxy engine sets its own)", endpoint)
        stream = bool(request.get("stream"))
        state = RequestState()
        state.activate()  # the upstream's tasks (made from here on) see this request's state
        upstream = Upstream(self.up.app, scope, body, receive)
        self.open.add(state)
        outcome = {"first_byte": False}
        try:
            await self._forward(upstream, state, send, endpoint, stream, outcome)
        finally:
            try:
                await upstream.close()
            finally:
                self._settle(state, aborted=not outcome["first_byte"])
                self.open.discard(state)

    async def _forward(self, upstream, state, send, endpoint, stream, outcome):
        loop = asyncio.get_running_loop()
        limit = self.opt.a3_first_byte_timeout
        deadline = loop.time() + limit
        start, chunks, failure, finished, first_byte = None, [], None, False, False
        try:
            while not finished and not first_byte:
                kind, item = await upstream.get(max(0.0, deadline - loop.time()))
                if kind == "msg" and item["type"] == "http.response.start":
                    start = item
                elif kind == "msg" and item["type"] == "http.response.body":
                    data = item.get("body")
                    if data:
                        chunks.append(data)
                        first_byte = start is not None and 200 <= start["status"] < 300 and bool(data.strip())
                elif kind == "exc":
                    failure, finished = item, True
                elif kind == "end":
                    finished = True
        except asyncio.TimeoutError:
            self.count("a3_proxy_first_byte_timeouts_total")
            who, role = self.suspect(state.trace, "no first byte within %gs" % limit)
            log.warning("%s: no first byte within %gs%s -> 503", endpoint, limit,
                        (", waiting on " + who) if who else "")
            return await self.error(send, endpoint, 503, "no answer from the backends within %gs (first-byte "
                                    "timeout%s); the request was cancelled, retry later"
                                    % (limit, (", waiting on " + role) if role else ""), self.retry_after)
        if upstream.client_gone:
            self.count_request(endpoint, 499)
            return None
        if not first_byte:
            return await self._answer_failed(state, send, endpoint, start, b"".join(chunks), failure)
        outcome["first_byte"] = True
        if not stream:
            idle = self.opt.a3_idle_timeout
            try:
                while not finished:
                    kind, item = await upstream.get(idle)
                    if kind == "msg" and item["type"] == "http.response.body":
                        chunks.append(item.get("body", b""))
                    elif kind in ("exc", "end"):  # the body is judged whole: an exception after it adds nothing
                        finished = True
            except asyncio.TimeoutError:
                self.count("a3_proxy_idle_timeouts_total")
                who, role = self.suspect(state.trace, "the answer stalled for %gs after its first byte" % idle)
                log.warning("%s: the answer stalled for %gs after its first byte%s -> 504", endpoint, idle,
                            (", waiting on " + who) if who else "")
                return await self.error(send, endpoint, 504, "the answer stalled: nothing from the backends for %gs "
                                        "after it started (idle timeout%s); the request was cancelled"
                                        % (idle, (", waiting on " + role) if role else ""))
            if upstream.client_gone:
                self.count_request(endpoint, 499)
                return None
            return await self._answer_complete(state, send, endpoint, start, b"".join(chunks), None)
        return await self._answer_stream(upstream, state, send, endpoint, start, chunks)

    async def _answer_failed(self, state, send, endpoint, start, body, failure):
        """The upstream finished without a usable first byte: pass a backend's 4xx on, else 502."""
        answer = find_exception(failure, BackendAnswer)
        if answer is not None:
            status, body = backend_error_answer(answer.status, answer.body)
            self.count("a3_proxy_backend_client_errors_total")
            self.count_request(endpoint, status)
            if status != answer.status:
                log.error("%s: backend %s refused the proxy's key (HTTP %d): %s; check vllm_api_key", endpoint,
                          answer.backend, answer.status, snippet(answer.body))
            else:
                log.warning("%s: backend %s answered HTTP %d (passed on to the client, not retried): %s", endpoint,
                            answer.backend, answer.status, snippet(answer.body))
            return await send_bytes(send, status, scrub_body(body, self.hosts()), b"application/json")
        if failure is not None:
            carried = status_error_answer(failure)
            if carried and 400 <= carried[0] < 500 and is_json_error(carried[1]):
                self.count_request(endpoint, carried[0])
                return await send_bytes(send, carried[0], scrub_body(carried[1], self.hosts()), b"application/json")
        return await self._answer_complete(state, send, endpoint, start, body, failure)

    async def _answer_complete(self, state, send, endpoint, start, body, failure):
        status = start["status"] if start else None
        verdict = classify_answer(status, body, exc_text(failure, where=False) if failure is not None else None)
        if verdict.passed:
            self.count_request(endpoint, status)
            hidden = (b"content-length", b"content-type", b"transfer-encoding")
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in hidden]
            ctype = dict((k.lower(), v) for k, v in start.get("headers", [])).get(b"content-type",
                                                                                  b"application/json")
            if status >= 400:  # the upstream app's own 4xx error (what passes is a 2xx or that): no address in it
                body = scrub_body(body, self.hosts())
            return await send_bytes(send, status, body, ctype, headers)
        self.count({"empty_200": "a3_proxy_empty_200_blocked_total",
                    "not_completion": "a3_proxy_not_completion_blocked_total"}.get(verdict.kind,
                                                                                   "a3_proxy_upstream_errors_total"))
        who, role = self.suspect(state.trace, verdict.kind)
        logged = classify_answer(status, body, exc_text(failure) if failure is not None else None)
        log.warning("%s: %s%s -> %d", endpoint, logged.message, (" [last backend: %s]" % who) if who else "",
                    verdict.code)
        message = verdict.message + ((" [last backend: %s]" % role) if role else "")
        return await self.error(send, endpoint, verdict.code, message)

    async def _answer_stream(self, upstream, state, send, endpoint, start, chunks):
        self.count_request(endpoint, start["status"])
        since = len(state.trace)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        tracker = DoneTracker()
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        for data in chunks:
            tracker.feed(data)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        failure, retried, stalled = None, False, False
        idle = self.opt.a3_idle_timeout
        while True:
            try:
                kind, item = await upstream.get(idle)
            except asyncio.TimeoutError:
                stalled = True
                break
            if kind == "msg" and item["type"] == "http.response.body":
                data = item.get("body")
                if data and retried_mid_stream([self._role_of(e["backend"]) for e in state.trace[since:]]):
                    retried = True  # what follows repeats the start of the answer: stop here
                    break
                if data:
                    tracker.feed(data)
                    await send({"type": "http.response.body", "body": data, "more_body": True})
            elif kind == "exc":
                failure = item
                break
            elif kind == "end":
                break
        if upstream.client_gone:
            return None
        tail = b""
        if not tracker.done:
            if stalled:
                self.count("a3_proxy_idle_timeouts_total")
                why = "the answer stream stalled: nothing from the backends for %gs (idle timeout)" % idle
            else:
                why = "the answer stream was cut before it ended (a decode backend failed mid-answer)"
                if retried:
                    why += "; the proxy engine retried the decode from the start, the repeated text was not sent"
            self.count("a3_proxy_stream_interrupted_total")
            who, role = self.suspect(state.trace, "stream stalled" if stalled else "stream cut")
            log.warning("%s: %s%s%s", endpoint, why, (": " + exc_text(failure)) if failure is not None else "",
                        (" [last backend: %s]" % who) if who else "")
            message = why + ((": " + exc_text(failure, where=False)) if failure is not None else "")
            message += (" [last backend: %s]" % role) if role else ""
            tail = sse_error_tail(self.scrub(message), tracker.tail, 504 if stalled else 502)
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        return None
