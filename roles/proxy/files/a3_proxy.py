#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy): an honest front for vllm-ascend's proxy.
"""a3_proxy.py: an honest wrapper around vllm-ascend's load_balance_proxy_server_example.py.

The upstream example (v0.18.0) stays the engine of the proxy: this file imports it by path (by default
from its own directory), lets it parse its own command line, runs its lifespan (which builds its
ProxyState) and forwards every request to its ASGI app. What this file adds:

* A prober: every backend (prefill and decode) gets GET /health every --a3-probe-interval seconds.
  After --a3-fail-threshold consecutive failed probes a backend leaves the upstream rotation (through
  the upstream's own remove_prefillers/remove_decoders); when /health answers 200 again it comes back
  (through the upstream's add_prefillers/add_decoders). Every change is logged with its reason.
* /healthcheck answers 200 only when at least one healthy prefill and one healthy decode backend are in
  the rotation, else 503 with a JSON body naming what is missing and a Retry-After header.
* /v1/completions and /v1/chat/completions never give an empty or meaningless 200: no healthy backend
  -> 503 at once; an upstream failure -> 502 with an OpenAI-style error body; no first byte within
  --a3-first-byte-timeout -> 503 (the upstream request is cancelled); a stream cut midway ends with an
  SSE error event and "data: [DONE]". The backend's own 4xx JSON errors are passed on as they are.
* GET /a3/backends (the prober's view, JSON) and GET /metrics (Prometheus text).
* Drain for maintenance: POST /a3/drain {"backends": ["host:port", ...]} keeps those backends out of the
  selection (new requests go to the others, chosen by the upstream's least-load rule; what the drained
  ones are serving finishes) until POST /a3/undrain with
  the same body. A drain survives the backend's restart (the prober does not put it back); every backend
  of a role drained means 503 for clients, as when none is healthy. /a3/backends shows each backend's
  "drained" flag and "inflight_requests" (client requests still open that the upstream sent, or chose to
  send, to that backend: 0 when idle), which a rolling restart waits on. It is counted here, per client
  request, from the upstream's selection to the end of the request: the upstream's own count
  ("outstanding_load", its active tokens) is released only when a stream runs to its end, so every stream
  cut short (a client gone, a first-byte timeout) leaves it above zero for good. The upstream's
  /instances/remove is no drain under load: it only lowers a backend's priority while any request runs,
  and the next selection or release undoes that.

The decision logic (argument split, answer classification, error bodies, the health decision, the
rotation state machine, the metrics text) is plain Python at the top of this file and imports nothing
outside the standard library, so it can be tested without fastapi or httpx. The live part (httpx,
uvicorn, the upstream module) is imported only when the proxy runs.

Usage: python a3_proxy.py <the upstream's options> [--a3-... options]   (see --help)
"""

import argparse
import asyncio
import base64
import contextvars
import importlib.util
import json
import logging
import math
import os
import re
import sys
import time

UPSTREAM_FILE = "load_balance_proxy_server_example.py"
UPSTREAM_MODULE = "load_balance_proxy_server_example"
ROLES = ("prefill", "decode")
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
SSE_DONE = b"data: [DONE]"
# Below this the upstream's outstanding load of a backend counts as idle (its scores are sums and
# differences of floats of 10 and more: what is left when every request was released is rounding).
IDLE_LOAD = 1.0

log = logging.getLogger("a3_proxy")


# ============================================================================ command line

class UsageError(Exception):
    """A problem with the wrapper's own options (reported like argparse does, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive_float(text):
    value = float(text)
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0, got %s" % text)
    return value


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %s" % text)
    return value


# argparse names the type in its message for a value it cannot convert ("invalid number value: 'x'")
_positive_float.__name__ = "number"
_positive_int.__name__ = "integer"


def build_parser(prog="a3_proxy.py"):
    """The wrapper's own options. Everything else belongs to the upstream script's parser."""
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False,
                     description="Options of the honest wrapper; all other options go to %s." % UPSTREAM_FILE)
    group = parser.add_argument_group("wrapper options (a3)")
    group.add_argument("--a3-probe-interval", type=_positive_float, default=5.0, metavar="S",
                       help="seconds between two GET /health probes of every backend (default 5)")
    group.add_argument("--a3-probe-timeout", type=_positive_float, default=2.0, metavar="S",
                       help="seconds a probe may take before it counts as failed (default 2)")
    group.add_argument("--a3-fail-threshold", type=_positive_int, default=3, metavar="N",
                       help="consecutive failed probes before a backend leaves the rotation (default 3)")
    group.add_argument("--a3-first-byte-timeout", type=_positive_float, default=300.0, metavar="S",
                       help="seconds a completion may take until its first body byte (a stream's first chunk, "
                            "a non-stream answer's body) before the client gets 503 (default 300)")
    group.add_argument("--a3-retry-after", type=_positive_int, default=10, metavar="S",
                       help="value of the Retry-After header of every 503 (default 10)")
    group.add_argument("--a3-upstream-script", default=None, metavar="PATH",
                       help="the upstream proxy script (default: %s next to this file)" % UPSTREAM_FILE)
    group.add_argument("--a3-etcd", default=None, metavar="HOST:PORT",
                       help="etcd client address: each probe round reads the openYuanrong datasystem workers' "
                            "registrations (/datasystem/cluster/) through etcd's JSON gateway for /metrics")
    group.add_argument("--a3-ds-worker", action="append", default=[], metavar="HOST:PORT",
                       help="a datasystem worker address that must be registered and ready (repeat per worker; "
                            "exported as a3_proxy_ds_worker_registered)")
    return parser


def split_argv(argv, prog="a3_proxy.py"):
    """Split a command line into (our options, the upstream's arguments in their original order).

    Raises UsageError for a malformed --a3-* option and for an --a3-* option we do not know (the upstream
    parser would reject it too, but with a less helpful message). Abbreviations are not accepted.
    """
    parser = build_parser(prog)
    ours, rest = parser.parse_known_args(list(argv))
    unknown = [arg for arg in rest if arg.startswith("--a3-")]
    if unknown:
        raise UsageError("unrecognized arguments: %s" % " ".join(unknown))
    return ours, rest


def wants_help(rest):
    return any(arg in ("-h", "--help") for arg in rest)


# ============================================================================ answers and errors

def error_body(message, etype, code):
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": etype, "code": code}}


ERROR_TYPES = {400: "BadRequestError", 502: "BadGatewayError", 503: "ServiceUnavailableError"}


class Verdict(object):
    """What the client gets for an upstream answer: pass it on, or an error (code, message, kind).

    kind names the reason for the metrics and logs: empty_200, not_completion, upstream_error,
    upstream_status.
    """
    __slots__ = ("passed", "code", "message", "kind")

    def __init__(self, passed, code=None, message=None, kind=None):
        self.passed, self.code, self.message, self.kind = passed, code, message, kind

    def __repr__(self):
        return "Verdict(passed=%r, code=%r, kind=%r, message=%r)" % (self.passed, self.code, self.kind, self.message)


PASS = Verdict(True)


def _snippet(body, limit=300):
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    body = " ".join(str(body).split())
    return body if len(body) <= limit else body[:limit] + "..."


def _json(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def is_json_error(body):
    """True when body is a JSON object carrying an error ({"error": ...} or FastAPI's {"detail": ...})."""
    data = _json(body)
    return isinstance(data, dict) and ("error" in data or "detail" in data)


def _error_text(data):
    err = data.get("error", data.get("detail"))
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def classify_answer(status, body, failure=None):
    """Decide what a client gets for a complete upstream answer (a non-stream answer, or any non-2xx).

    status/body: what the upstream app sent (status None when it sent nothing). failure: a short text of
    the exception the upstream raised, if any (it names the backend that failed).
    """
    body = body or b""
    cause = " (%s)" % failure if failure else ""
    if status is None:
        return Verdict(False, 502, "the proxy engine failed before answering%s" % cause, "upstream_error")
    if 200 <= status < 300:
        if not body.strip():
            return Verdict(False, 502, "the backends gave no answer: the proxy engine returned HTTP %d with an "
                                       "empty body (a decode backend down, or its answer unusable)%s"
                           % (status, cause), "empty_200")
        data = _json(body)
        if isinstance(data, dict) and "error" in data:
            return Verdict(False, 502, "the backend reported an error: %s" % _error_text(data), "upstream_error")
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            return Verdict(False, 502, "the backends' answer is not a completion (no 'choices'): %s"
                           % _snippet(body), "not_completion")
        return PASS
    if 400 <= status < 500 and is_json_error(body):
        return PASS
    if failure:  # the exception says more than the upstream's generic "Internal Server Error"
        detail = failure
    else:
        detail = _error_text(_json(body)) if is_json_error(body) else _snippet(body)
    return Verdict(False, 502, "the proxy engine answered HTTP %d%s" % (status, (": " + detail) if detail else ""),
                   "upstream_status")


def sse_event(obj):
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"


def sse_error_tail(message, previous=b""):
    """What closes a stream that was cut: an error event and [DONE], after whatever ends the last event."""
    if previous.endswith(b"\n\n") or not previous:
        sep = b""
    elif previous.endswith(b"\n"):
        sep = b"\n"
    else:
        sep = b"\n\n"
    return sep + sse_event(error_body(message, ERROR_TYPES[502], 502)) + SSE_DONE + b"\n\n"


class DoneTracker(object):
    """Finds "data: [DONE]" in a byte stream whose chunks may split it."""

    def __init__(self):
        self.tail = b""
        self.done = False
        self.data = False

    def feed(self, chunk):
        if chunk.strip():
            self.data = True
        window = self.tail + chunk
        if SSE_DONE in window:
            self.done = True
        self.tail = window[-(len(SSE_DONE) + 4):]


# ============================================================================ backend health

def backend_key(host, port):
    return "%s:%s" % (host, port)


class BackendHealth(object):
    """The prober's view of one backend, and the rotation state machine with its threshold.

    state: "unknown" (listed, not yet answered a probe; it is in the upstream rotation as listed),
    "up" (answered, in the rotation), "down" (failed `threshold` probes in a row; taken out of the
    rotation by the prober). observe() returns the action the caller must apply to the upstream
    rotation: "remove", "add" or None.
    """

    def __init__(self, role, host, port, threshold, now, reason="listed on the command line"):
        if role not in ROLES:
            raise ValueError("role must be one of %s, got %r" % (ROLES, role))
        self.role, self.host, self.port = role, str(host), int(port)
        self.threshold = int(threshold)
        self.state = "unknown"
        self.failures = 0
        self.probes = 0
        self.last_probe_ok = None
        self.last_probe_time = None
        self.last_probe_detail = ""
        self.last_change_time = now
        self.last_change_reason = reason
        self.request_failures = 0
        self.last_request_failure = None
        self.last_request_failure_time = None

    @property
    def key(self):
        return backend_key(self.host, self.port)

    def _change(self, state, now, reason):
        self.state = state
        self.last_change_time = now
        self.last_change_reason = reason

    def observe(self, ok, detail, now):
        self.probes += 1
        self.last_probe_ok = bool(ok)
        self.last_probe_time = now
        self.last_probe_detail = detail
        if ok:
            self.failures = 0
            if self.state == "down":
                self._change("up", now, "/health answers again (%s)" % detail)
                return "add"
            if self.state == "unknown":
                self._change("up", now, "first /health probe succeeded (%s)" % detail)
            return None
        self.failures += 1
        if self.state != "down" and self.failures >= self.threshold:
            self._change("down", now, "%d consecutive failed /health probes (last: %s)" % (self.failures, detail))
            return "remove"
        return None

    def request_failed(self, detail, now):
        """A client request failed or timed out while waiting on this backend. It only marks the backend as
        suspect (shown in /a3/backends and /metrics, and the prober runs at once): the rotation follows
        the probes alone."""
        self.request_failures += 1
        self.last_request_failure = detail
        self.last_request_failure_time = now

    def snapshot(self, in_rotation, drained=False, outstanding_load=0.0, inflight_requests=0):
        return {"role": self.role, "backend": self.key, "state": self.state, "in_rotation": bool(in_rotation),
                "drained": bool(drained), "outstanding_load": round(float(outstanding_load), 3),
                "inflight_requests": int(inflight_requests),
                "healthy": self.state == "up", "last_probe_ok": self.last_probe_ok,
                "last_probe_time": iso_time(self.last_probe_time), "last_probe_detail": self.last_probe_detail,
                "consecutive_failures": self.failures, "last_change_time": iso_time(self.last_change_time),
                "last_change_reason": self.last_change_reason, "request_failures": self.request_failures,
                "last_request_failure": self.last_request_failure,
                "last_request_failure_time": iso_time(self.last_request_failure_time)}


def retried_mid_stream(roles):
    """True when, after a stream started, the upstream asked a decode backend again without a new prefill
    first (roles: the roles of the backends contacted since the first byte, in order). That is the
    upstream's retry of a failed decode stream: it starts the answer again, so the client would get its
    beginning twice. (Its "recomputed" continuation asks a prefill first.)"""
    for role in roles:
        if role == "prefill":
            return False
        if role == "decode":
            return True
    return False


def culprit(trace):
    """The backend a failed request was waiting on, from its trace ([{"backend": "h:p", "status": int or
    None}, ...] in the order the upstream contacted them): the last one that never answered (a
    connection error, a hang), else the last one contacted (it answered, but not usefully). None when
    no backend was contacted."""
    for entry in reversed(trace):
        if entry["status"] is None:
            return entry["backend"]
    return trace[-1]["backend"] if trace else None


def iso_time(ts):
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int((ts % 1) * 1000)


def usable(snap):
    return snap["healthy"] and snap["in_rotation"] and not snap.get("drained", False)


def parse_backend_list(body, known):
    """The backends a POST /a3/drain or /a3/undrain names: body is the request's bytes, a JSON object
    {"backends": ["host:port", ...]}; known: the backend keys the proxy has. Returns the list, or raises
    ValueError with what is wrong and what the proxy knows."""
    data = _json(body)
    names = data.get("backends") if isinstance(data, dict) else None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError('the body must be a JSON object {"backends": ["host:port", ...]} with at least one backend')
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError("unknown backend%s %s: the proxy has %s" % ("s" if len(unknown) > 1 else "",
                         ", ".join(unknown), ", ".join(sorted(set(known))) or "none"))
    return sorted(set(names))


def choose_undrained(servers, drained, tainted, role):
    """The index in servers (the upstream's prefillers or decoders list, ServerState objects) of the least
    loaded server that is neither drained ("host:port" in drained) nor tainted (marked for removal by the
    upstream), by the upstream's own priority (active tokens, plus 0.3 x the KV cache held for prefill);
    ties go to the lower index. None when every server is drained or tainted.

    Chosen from the list, not from the upstream's heap: the index is what the upstream uses to look the
    server up, and the heap's entries stop matching the list's positions once backends have been removed
    and added back (its removal runs in another thread than its selection)."""
    best = None
    for index, server in enumerate(servers):
        if backend_key(server.host, server.port) in drained or any(server is t for t in tainted):
            continue
        load = float(server.active_tokens or 0)
        if role == "prefill":
            load += 0.3 * float(server.active_kv_cache or 0)
        if best is None or load < best[0]:
            best = (load, index)
    return None if best is None else best[1]


def outstanding_load(server, role):
    """The work the upstream still counts on a server (ServerState): its active tokens, and for a prefill
    the KV cache decode has not pulled yet. Below IDLE_LOAD the server is idle."""
    load = float(getattr(server, "active_tokens", 0) or 0)
    if role == "prefill":
        load += float(getattr(server, "active_kv_cache", 0) or 0)
    return load


def health_decision(snapshots):
    """(HTTP status, JSON body) of /healthcheck, from the backend snapshots (BackendHealth.snapshot)."""
    healthy = dict((role, [s for s in snapshots if s["role"] == role and usable(s)]) for role in ROLES)
    counts = {"healthy_prefill": len(healthy["prefill"]), "healthy_decode": len(healthy["decode"]),
              "prefill_instances": sum(1 for s in snapshots if s["role"] == "prefill" and s["in_rotation"]),
              "decode_instances": sum(1 for s in snapshots if s["role"] == "decode" and s["in_rotation"])}
    missing = [role for role in ROLES if not healthy[role]]
    if not missing:
        return 200, dict({"status": "ok"}, **counts)
    parts = []
    for role in missing:
        mine = [s for s in snapshots if s["role"] == role]
        if not mine:
            parts.append("no %s backend is configured" % role)
            continue
        why = ", ".join("%s %s" % (s["backend"], _why_not(s)) for s in mine)
        parts.append("no healthy %s backend in rotation (%s)" % (role, why))
    return 503, dict({"status": "unavailable", "missing": missing, "message": "; ".join(parts)}, **counts)


def _why_not(snap):
    if snap["state"] == "unknown":
        if snap["last_probe_ok"] is None:
            return "not probed yet"
        return "not answered /health yet (%d failed: %s)" % (snap["consecutive_failures"], snap["last_probe_detail"])
    if snap.get("drained"):
        return "drained for maintenance (POST /a3/undrain puts it back)"
    if snap["state"] == "down":
        return "out of rotation: %s" % snap["last_change_reason"]
    if not snap["in_rotation"]:
        return "healthy but not in the upstream rotation (removed through /instances/remove?)"
    return "ok"


# ============================================================================ metrics

DS_PREFIX = "/datasystem/cluster/"
_DS_READY = re.compile(r"^[^;]*;ready(;|$)")


def ds_range_request():
    """The body of etcd's POST /v3/kv/range for every key under DS_PREFIX (keys are base64 in the gateway)."""
    return {"key": base64.b64encode(DS_PREFIX.encode()).decode(),
            "range_end": base64.b64encode(DS_PREFIX[:-1].encode() + b"0").decode()}


def ds_worker_states(answer, expected):
    """{worker: 1 or 0} for every expected worker address from an etcd /v3/kv/range answer (parsed JSON): 1 when
    its key /datasystem/cluster/<worker> exists with a value "<ts>;ready[;...]" (a worker registers first and
    answers "Worker not ready" until its state reaches ready), else 0. Registered workers nobody expects are
    added too (the pool may hold more members than this deployment's)."""
    states = {worker: 0 for worker in expected}
    for kv in (answer or {}).get("kvs") or []:
        key = base64.b64decode(kv.get("key", "")).decode("utf-8", "replace")
        if not key.startswith(DS_PREFIX):
            continue
        value = base64.b64decode(kv.get("value", "")).decode("utf-8", "replace")
        states[key[len(DS_PREFIX):]] = 1 if _DS_READY.search(value) else 0
    return states


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_metrics(requests, snapshots, counters, start_time=None, ds_workers=None, etcd_ok=None):
    """Prometheus text. requests: {(endpoint, code): n}; counters: {name: n} of the *_total counters;
    start_time: the process start (epoch s), exported as process_start_time_seconds (restart alerts);
    ds_workers: {worker: 1 or 0} from ds_worker_states(), None when etcd was not read (the series are left out
    then rather than reported as 0); etcd_ok: whether the last read of etcd worked, None without --a3-etcd."""
    out = []
    if start_time is not None:
        out += ["# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
                "# TYPE process_start_time_seconds gauge", "process_start_time_seconds %d" % int(start_time)]
    out += ["# HELP a3_proxy_requests_total Completion requests by endpoint and the HTTP status the client got.",
            "# TYPE a3_proxy_requests_total counter"]
    for (endpoint, code), n in sorted(requests.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        out.append('a3_proxy_requests_total{endpoint="%s",code="%s"} %d' % (_label(endpoint), _label(code), n))
    out += ["# HELP a3_proxy_backend_up 1 when the backend is healthy and in the upstream rotation, else 0.",
            "# TYPE a3_proxy_backend_up gauge"]
    for s in sorted(snapshots, key=lambda s: (s["role"], s["backend"])):
        out.append('a3_proxy_backend_up{role="%s",backend="%s"} %d'
                   % (s["role"], _label(s["backend"]), 1 if usable(s) else 0))
    out += ["# HELP a3_proxy_backend_drained 1 while the backend is drained for maintenance (/a3/drain).",
            "# TYPE a3_proxy_backend_drained gauge"]
    for s in sorted(snapshots, key=lambda s: (s["role"], s["backend"])):
        out.append('a3_proxy_backend_drained{role="%s",backend="%s"} %d'
                   % (s["role"], _label(s["backend"]), 1 if s.get("drained") else 0))
    out += ["# HELP a3_proxy_backend_consecutive_failures Consecutive failed /health probes of the backend.",
            "# TYPE a3_proxy_backend_consecutive_failures gauge"]
    for s in sorted(snapshots, key=lambda s: (s["role"], s["backend"])):
        out.append('a3_proxy_backend_consecutive_failures{role="%s",backend="%s"} %d'
                   % (s["role"], _label(s["backend"]), s["consecutive_failures"]))
    out += ["# HELP a3_proxy_backend_request_failures_total Client requests that failed or timed out waiting on "
            "the backend.", "# TYPE a3_proxy_backend_request_failures_total counter"]
    for s in sorted(snapshots, key=lambda s: (s["role"], s["backend"])):
        out.append('a3_proxy_backend_request_failures_total{role="%s",backend="%s"} %d'
                   % (s["role"], _label(s["backend"]), s.get("request_failures", 0)))
    helps = {
        "a3_proxy_empty_200_blocked_total": "Empty HTTP 200 answers of the proxy engine turned into 502.",
        "a3_proxy_first_byte_timeouts_total": "Completions cancelled because no first byte came in time (503).",
        "a3_proxy_not_completion_blocked_total": "HTTP 200 answers without choices turned into 502.",
        "a3_proxy_upstream_errors_total": "Failures of the proxy engine or a backend turned into 502.",
        "a3_proxy_no_backend_total": "Completions refused at once with 503: no healthy prefill or decode backend.",
        "a3_proxy_stream_interrupted_total": "Streams cut midway, closed with an error event and [DONE].",
        "a3_proxy_rotation_changes_total": "Backends taken out of or put back into the upstream rotation.",
    }
    for name in sorted(helps):
        out += ["# HELP %s %s" % (name, helps[name]), "# TYPE %s counter" % name,
                "%s %d" % (name, counters.get(name, 0))]
    if etcd_ok is not None:
        out += ["# HELP a3_proxy_etcd_read_ok 1 when the last read of the workers' registrations in etcd worked.",
                "# TYPE a3_proxy_etcd_read_ok gauge", "a3_proxy_etcd_read_ok %d" % (1 if etcd_ok else 0)]
    if ds_workers is not None:
        out += ["# HELP a3_proxy_ds_worker_registered 1 when the datasystem worker's etcd key says ready, else 0.",
                "# TYPE a3_proxy_ds_worker_registered gauge"]
        for worker in sorted(ds_workers):
            out.append('a3_proxy_ds_worker_registered{worker="%s"} %d' % (_label(worker), ds_workers[worker]))
    return "\n".join(out) + "\n"


# ============================================================================ the live proxy (needs httpx, uvicorn)

# The backends one client request contacted, filled by httpx event hooks on the upstream's clients. The
# upstream runs each request in a task that copies our context, so the hooks see the request's own list.
_TRACE = contextvars.ContextVar("a3_proxy_trace", default=None)
# The backends ("host:port") the upstream selected for the current client request (set per request by _Upstream).
_SELECTED = contextvars.ContextVar("a3_proxy_selected", default=None)


def _url_key(url):
    return backend_key(url.host, url.port or (443 if url.scheme == "https" else 80))


async def _trace_request(request):
    trace = _TRACE.get()
    if trace is not None:
        trace.append({"backend": _url_key(request.url), "status": None})


async def _trace_response(response):
    trace = _TRACE.get()
    if trace is not None:
        key = _url_key(response.request.url)
        for entry in reversed(trace):
            if entry["backend"] == key and entry["status"] is None:
                entry["status"] = response.status_code
                break


def _hook(server):
    """Add the trace hooks to the httpx client of one of the upstream's ServerState objects (once)."""
    client = server.client
    if getattr(client, "_a3_traced", False):
        return
    hooks = client.event_hooks
    hooks.setdefault("request", []).append(_trace_request)
    hooks.setdefault("response", []).append(_trace_response)
    client.event_hooks = hooks
    client._a3_traced = True


def load_upstream(path):
    """Import the upstream proxy script by path (it builds its FastAPI app at import time)."""
    spec = importlib.util.spec_from_file_location(UPSTREAM_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[UPSTREAM_MODULE] = module
    spec.loader.exec_module(module)
    missing = [name for name in ("parse_args", "app", "ProxyState", "ServerState") if not hasattr(module, name)]
    if missing:
        raise ImportError("%s lacks %s: not the vllm-ascend v0.18.0 proxy example" % (path, ", ".join(missing)))
    return module


def upstream_args(module, rest, prog):
    """Let the upstream script parse its own arguments (it reads sys.argv)."""
    saved = sys.argv
    sys.argv = [prog] + list(rest)
    try:
        return module.parse_args()
    finally:
        sys.argv = saved


def _exc_text(exc):
    """A one-line account of an exception the upstream raised, naming the backend URL when httpx knows it."""
    request = getattr(exc, "_request", None)  # httpx errors keep their request here
    url = getattr(request, "url", None)
    where = " %s %s" % (getattr(request, "method", ""), url) if url is not None else ""
    carried = _status_error_answer(exc)
    if carried:
        status, body = carried
        detail = _error_text(_json(body)) if is_json_error(body) else _snippet(body, 200)
        return "backend%s answered HTTP %d%s" % (where, status, (": " + detail) if detail else "")
    first_line = (str(exc) or repr(exc)).strip().splitlines()[0]
    return "%s: %s%s" % (type(exc).__name__, first_line, (" (%s)" % where.strip()) if where else "")


def _status_error_answer(exc):
    """(status, body) of a backend's answer carried by an httpx.HTTPStatusError, else None."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    try:
        return status, bytes(response.content)
    except Exception:  # a streamed response that was never read
        return status, b""


class _Upstream(object):
    """One request forwarded to the upstream ASGI app, its messages collected through a queue.

    The upstream learns that the request is over (timeout, client gone, our decision) the way it learns
    of a client disconnect: receive() returns http.disconnect, and send() raises OSError.
    """

    def __init__(self, app, scope, body, receive):
        self.trace = []
        self.selected = set()
        _TRACE.set(self.trace)  # the upstream task created below copies this context
        _SELECTED.set(self.selected)
        self.queue = asyncio.Queue(maxsize=64)
        self.abort = asyncio.Event()
        self.client_gone = False
        self._body_given = False
        self._receive = receive
        scope = dict(scope)
        # Ask for the ASGI 2.3 behaviour (starlette then watches receive() for a disconnect while it
        # streams), so an abort also stops a stream that waits on a hung backend.
        scope["asgi"] = dict(scope.get("asgi") or {}, spec_version="2.3")
        self._body = body
        self.task = asyncio.ensure_future(self._run(app, scope))

    async def _run(self, app, scope):
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the upstream re-raises after its 500 answer: keep the cause
            await self._put(("exc", exc))
            return
        await self._put(("end", None))

    async def _put(self, item):
        if self.abort.is_set():
            return
        await self.queue.put(item)

    async def receive(self):
        if not self._body_given:
            self._body_given = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        if self.abort.is_set():
            return {"type": "http.disconnect"}
        real = asyncio.ensure_future(self._receive())
        aborted = asyncio.ensure_future(self.abort.wait())
        try:
            done, _unused = await asyncio.wait({real, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (real, aborted):
                if not fut.done():
                    fut.cancel()
        if real in done:
            message = real.result()
            if message.get("type") == "http.disconnect":
                self.client_gone = True
            return message
        return {"type": "http.disconnect"}

    async def send(self, message):
        if self.abort.is_set():
            raise OSError("a3_proxy: the request is over")
        await self.queue.put(("msg", message))

    async def get(self, timeout=None):
        if timeout is None:
            return await self.queue.get()
        return await asyncio.wait_for(self.queue.get(), timeout)

    async def close(self, grace=3.0):
        """End the upstream request: signal a disconnect, let it unwind, cancel it if it does not."""
        self.abort.set()
        while not self.queue.empty():
            self.queue.get_nowait()
        if self.task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.task), grace)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
            pass
        if not self.task.done():
            self.task.cancel()
            try:
                await asyncio.wait_for(self.task, 1.0)
            except BaseException:
                pass


async def _read_request_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _send_json(send, status, obj, headers=()):
    body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    await _send_bytes(send, status, body, b"application/json", headers)


async def _send_bytes(send, status, body, content_type, headers=()):
    hdrs = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())] + list(headers)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class HonestProxy(object):
    """The ASGI app: our endpoints and checks around the upstream app."""

    def __init__(self, upstream, options):
        self.up = upstream
        self.opt = options
        self.backends = {}  # (role, "host:port") -> BackendHealth
        self.drained = set()  # "host:port" of the backends drained for maintenance
        self.open = set()  # the _Upstream of every client request still open
        self.requests = {}
        self.counters = {}
        self._wake = None
        self._prober = None
        self._probe_client = None
        self._lifespan_cm = None
        self._retry_after = [(b"retry-after", str(options.a3_retry_after).encode())]
        self.ds_workers = None  # {worker: 1/0} of the last good read of etcd, None before the first one
        self.etcd_ok = None if not options.a3_etcd else False
        now = time.time()
        self.started = now
        args = upstream.global_args
        for role, instances in (("prefill", args.prefiller_instances), ("decode", args.decoder_instances)):
            for host, port in instances:
                self._track(role, host, port, now, "listed on the command line")

    # ------------------------------------------------------------------ bookkeeping
    def _track(self, role, host, port, now, reason):
        key = (role, backend_key(host, port))
        if key not in self.backends:
            self.backends[key] = BackendHealth(role, host, port, self.opt.a3_fail_threshold, now, reason)
        return self.backends[key]

    def _count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def _count_request(self, endpoint, code):
        self.requests[(endpoint, str(code))] = self.requests.get((endpoint, str(code)), 0) + 1

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
        return sum(1 for u in self.open if backend.key in u.selected)

    def snapshots(self):
        return [b.snapshot(self.in_rotation(b), b.key in self.drained, self._load(b), self.inflight(b))
                for b in self.backends.values()]

    def _pin_selection(self):
        """While a backend is drained, the upstream's select_prefiller/select_decoder (replaced on its
        ProxyState instance) choose among the others (choose_undrained) and book the load the way the
        upstream does; with nothing drained, or nothing else left, the upstream selects as it always does.
        Either way the chosen backend is noted for the client request (_SELECTED), which inflight() counts."""
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
                selected = _SELECTED.get()
                if selected is not None and 0 <= index < len(servers):
                    selected.add(str(servers[index]))
                return index
            setattr(state, name, select)

    async def _drain(self, send, path, receive):
        body = await _read_request_body(receive)
        if body is None:
            return
        try:
            names = parse_backend_list(body, [b.key for b in self.backends.values()])
        except ValueError as exc:
            return await _send_json(send, 400, error_body(str(exc), "BadRequestError", 400))
        drain = path == "/a3/drain"
        changed = sorted(set(names) - self.drained) if drain else sorted(set(names) & self.drained)
        if drain:
            self.drained.update(names)
        else:
            self.drained.difference_update(names)
        if changed:
            self._count("a3_proxy_rotation_changes_total", len(changed))
            log.warning("%s %s", "drained for maintenance (kept out of the selection):" if drain else
                        "undrained (back in the selection):", ", ".join(changed))
        return await _send_json(send, 200, {"drained": sorted(self.drained), "changed": changed, "backends": sorted(
            (s for s in self.snapshots() if s["backend"] in names), key=lambda s: (s["role"], s["backend"]))})

    def _discover(self):
        """Backends added to the upstream through /instances/add are probed too."""
        now = time.time()
        for role in ROLES:
            for server in self._lists(role)[0]:
                _hook(server)
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
        self._count("a3_proxy_rotation_changes_total")
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
        _hook(server)
        add([server])
        servers, _unused = self._lists(backend.role)
        if not any(s is server for s in servers):  # it was only marked for removal: the old entry is kept
            asyncio.ensure_future(server.client.aclose())
        self._count("a3_proxy_rotation_changes_total")
        log.warning("%s backend %s: back in the rotation: %s", backend.role, backend.key, reason)

    def _reconcile(self, backend):
        """A backend the probes hold down must not be in the upstream rotation (someone may have added it
        back through /instances/add). A healthy backend removed through /instances/remove stays out."""
        if backend.state == "down" and self.in_rotation(backend):
            self._remove(backend, "still in the upstream rotation while its probes fail")

    # ------------------------------------------------------------------ prober
    async def _probe(self, backend):
        import httpx
        host = "[%s]" % backend.host if ":" in backend.host else backend.host
        url = "http://%s:%d/health" % (host, backend.port)
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
        """One read of the workers' registrations in etcd (only with --a3-etcd). A failed read keeps no stale
        states: the series disappear and a3_proxy_etcd_read_ok drops to 0 (etcd's own alert says the rest)."""
        if not self.opt.a3_etcd:
            return
        url = "http://%s/v3/kv/range" % self.opt.a3_etcd
        try:
            response = await asyncio.wait_for(self._probe_client.post(url, json=ds_range_request()),
                                              self.opt.a3_probe_timeout + 0.5)
            response.raise_for_status()
            states = ds_worker_states(response.json(), self.opt.a3_ds_worker)
        except Exception as exc:  # a read that fails for any reason is reported the same way
            if self.etcd_ok is not False:
                log.warning("etcd %s: cannot read the datasystem workers' registrations: %s", self.opt.a3_etcd,
                            _exc_text(exc))
            self.etcd_ok, self.ds_workers = False, None
            return
        missing = sorted(w for w, up in states.items() if not up)
        if missing and missing != sorted(w for w, up in (self.ds_workers or {}).items() if not up):
            log.warning("datasystem workers not registered and ready in etcd: %s", ", ".join(missing))
        self.etcd_ok, self.ds_workers = True, states

    async def probe_round(self):
        self._discover()
        backends = list(self.backends.values())
        results = (await asyncio.gather(self.read_ds_workers(), *(self._probe(b) for b in backends)))[1:]
        now = time.time()
        for backend, (ok, detail) in zip(backends, results):
            before = backend.state
            action = backend.observe(ok, detail, now)
            try:
                if action == "remove":
                    self._remove(backend, backend.last_change_reason)
                    continue
                if action == "add":
                    self._add(backend, backend.last_change_reason)
                    continue
            except Exception:
                log.exception("%s backend %s: the upstream's %s failed", backend.role, backend.key, action)
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
        now rather than at the next interval. Returns "<role> backend <host:port>", or "" if unknown."""
        key = culprit(trace)
        found = [b for b in self.backends.values() if b.key == key]
        who = " or ".join("%s backend %s" % (b.role, b.key) for b in found) or (
            "backend %s" % key if key else "")
        for backend in found:
            backend.request_failed(why, time.time())
        log.warning("request failed (%s)%s: probing the backends now", why, (", waiting on " + who) if who else "")
        if self._wake is not None:
            self._wake.set()
        return who

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return await self.up.app(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path in ("/healthcheck", "/a3/backends", "/metrics"):
            if method != "GET":
                return await _send_json(send, 405, {"detail": "Method Not Allowed"}, [(b"allow", b"GET")])
            if path == "/healthcheck":
                status, body = health_decision(self.snapshots())
                return await _send_json(send, status, body, self._retry_after if status == 503 else ())
            if path == "/a3/backends":
                return await _send_json(send, 200, sorted(self.snapshots(), key=lambda s: (s["role"], s["backend"])))
            text = render_metrics(self.requests, self.snapshots(), self.counters, self.started, self.ds_workers,
                                  self.etcd_ok).encode()
            return await _send_bytes(send, 200, text, b"text/plain; version=0.0.4; charset=utf-8")
        if path in COMPLETION_PATHS and method == "POST":
            return await self._completion(scope, receive, send)
        if path in ("/a3/drain", "/a3/undrain"):
            if method != "POST":
                return await _send_json(send, 405, {"detail": "Method Not Allowed"}, [(b"allow", b"POST")])
            return await self._drain(send, path, receive)
        return await self.up.app(scope, receive, send)

    async def _lifespan(self, receive, send):
        import httpx
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        try:
            self._lifespan_cm = self.up.app.router.lifespan_context(self.up.app)
            await self._lifespan_cm.__aenter__()
            self._discover()  # hooks the clients the upstream just made
            self._pin_selection()
            self._probe_client = httpx.AsyncClient(timeout=httpx.Timeout(self.opt.a3_probe_timeout), trust_env=False,
                                                   limits=httpx.Limits(max_keepalive_connections=0))
            self._wake = asyncio.Event()
            self._prober = asyncio.ensure_future(self._probe_loop())
        except Exception as exc:
            log.exception("start-up failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        log.info("probing %d backends every %gs (timeout %gs, %d failures take one out of the rotation); "
                 "first-byte timeout %gs", len(self.backends), self.opt.a3_probe_interval, self.opt.a3_probe_timeout,
                 self.opt.a3_fail_threshold, self.opt.a3_first_byte_timeout)
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        self._prober.cancel()
        try:
            await self._prober
        except BaseException:
            pass
        await self._probe_client.aclose()
        try:
            await self._lifespan_cm.__aexit__(None, None, None)
        except Exception:
            log.exception("the upstream's shutdown failed")
        await send({"type": "lifespan.shutdown.complete"})

    async def _error(self, send, endpoint, code, message, headers=()):
        self._count_request(endpoint, code)
        await _send_json(send, code, error_body(message, ERROR_TYPES.get(code, "Error"), code), headers)

    async def _completion(self, scope, receive, send):
        endpoint = scope["path"]
        status, health = health_decision(self.snapshots())
        if status != 200:
            self._count("a3_proxy_no_backend_total")
            return await self._error(send, endpoint, 503, health["message"] + "; retry later", self._retry_after)
        body = await _read_request_body(receive)
        if body is None:
            self._count_request(endpoint, 499)
            return
        request = _json(body)
        if not isinstance(request, dict):
            return await self._error(send, endpoint, 400, "the request body must be a JSON object")
        stream = bool(request.get("stream", False))
        upstream = _Upstream(self.up.app, scope, body, receive)
        self.open.add(upstream)
        try:
            await self._forward(upstream, send, endpoint, stream)
        finally:
            try:
                await upstream.close()
            finally:
                self.open.discard(upstream)

    async def _forward(self, upstream, send, endpoint, stream):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.opt.a3_first_byte_timeout
        start, chunks, failure, finished, first_byte = None, [], None, False, False
        try:
            while not finished and not first_byte:
                kind, item = await upstream.get(max(0.0, deadline - loop.time()))
                if kind == "msg" and item["type"] == "http.response.start":
                    start = item
                elif kind == "msg" and item["type"] == "http.response.body":
                    data = item.get("body", b"")
                    if data:
                        chunks.append(data)
                        first_byte = start is not None and 200 <= start["status"] < 300 and bool(data.strip())
                elif kind == "exc":
                    failure, finished = item, True
                elif kind == "end":
                    finished = True
        except asyncio.TimeoutError:
            self._count("a3_proxy_first_byte_timeouts_total")
            who = self.suspect(upstream.trace, "no first byte within %gs" % self.opt.a3_first_byte_timeout)
            return await self._error(send, endpoint, 503, "no answer from the backends within %gs (first-byte "
                                     "timeout%s); the request was cancelled, retry later"
                                     % (self.opt.a3_first_byte_timeout, (", waiting on " + who) if who else ""),
                                     self._retry_after)
        if upstream.client_gone:
            self._count_request(endpoint, 499)
            return
        if not first_byte:
            return await self._answer_failed(upstream, send, endpoint, start, b"".join(chunks), failure)
        if not stream:
            while not finished:
                kind, item = await upstream.get()
                if kind == "msg" and item["type"] == "http.response.body":
                    chunks.append(item.get("body", b""))
                elif kind in ("exc", "end"):
                    failure, finished = (item if kind == "exc" else None), True
            if upstream.client_gone:
                self._count_request(endpoint, 499)
                return
            return await self._answer_complete(upstream, send, endpoint, start, b"".join(chunks), failure)
        return await self._answer_stream(upstream, send, endpoint, start, chunks)

    async def _answer_failed(self, upstream, send, endpoint, start, body, failure):
        """The upstream finished without a usable first byte: pass a backend's 4xx JSON error, else 502."""
        status = start["status"] if start else None
        if failure is not None:
            carried = _status_error_answer(failure)
            if carried and 400 <= carried[0] < 500 and is_json_error(carried[1]):
                self._count_request(endpoint, carried[0])
                return await _send_bytes(send, carried[0], carried[1], b"application/json")
        return await self._answer_complete(upstream, send, endpoint, start, body, failure)

    async def _answer_complete(self, upstream, send, endpoint, start, body, failure):
        status = start["status"] if start else None
        verdict = classify_answer(status, body, _exc_text(failure) if failure is not None else None)
        if verdict.passed:
            self._count_request(endpoint, status)
            hidden = (b"content-length", b"content-type", b"transfer-encoding")
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in hidden]
            ctype = dict((k.lower(), v) for k, v in start.get("headers", [])).get(b"content-type",
                                                                                  b"application/json")
            return await _send_bytes(send, status, body, ctype, headers)
        self._count({"empty_200": "a3_proxy_empty_200_blocked_total",
                     "not_completion": "a3_proxy_not_completion_blocked_total"}.get(verdict.kind,
                                                                                    "a3_proxy_upstream_errors_total"))
        message = verdict.message
        who = self.suspect(upstream.trace, verdict.kind)
        if who and who.rsplit(" ", 1)[-1] not in message:
            message += " [last backend: %s]" % who
        log.warning("%s: %s -> %d", endpoint, message, verdict.code)
        return await self._error(send, endpoint, verdict.code, message)

    def _role_of(self, key):
        roles = set(b.role for b in self.backends.values() if b.key == key)
        return roles.pop() if len(roles) == 1 else None

    async def _answer_stream(self, upstream, send, endpoint, start, chunks):
        self._count_request(endpoint, start["status"])
        since = len(upstream.trace)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        tracker = DoneTracker()
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        for data in chunks:
            tracker.feed(data)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        failure, retried = None, False
        while True:
            kind, item = await upstream.get()
            if kind == "msg" and item["type"] == "http.response.body":
                data = item.get("body", b"")
                if data and retried_mid_stream([self._role_of(e["backend"]) for e in upstream.trace[since:]]):
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
            return
        tail = b""
        if not tracker.done:
            why = "the answer stream was cut before it ended (a decode backend failed mid-answer)"
            if retried:
                why += "; the proxy engine retried the decode from the start, the repeated text was not sent"
            if failure is not None:
                why += ": " + _exc_text(failure)
            self._count("a3_proxy_stream_interrupted_total")
            who = self.suspect(upstream.trace, "stream cut")
            if who:
                why += " [last backend: %s]" % who
            log.warning("%s: %s", endpoint, why)
            tail = sse_error_tail(why, tracker.tail)
        await send({"type": "http.response.body", "body": tail, "more_body": False})


# ============================================================================ main

def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = os.path.basename(sys.argv[0]) or "a3_proxy.py"
    try:
        ours, rest = split_argv(argv, prog)
    except UsageError as exc:
        parser = build_parser(prog)
        parser.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (prog, exc))
        return 2
    if wants_help(rest):
        build_parser(prog).print_help()
        print("\nThe options of %s follow.\n" % UPSTREAM_FILE)
    script = ours.a3_upstream_script or os.path.join(os.path.dirname(os.path.abspath(__file__)), UPSTREAM_FILE)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # the upstream prints its status: show it in docker logs now
    except (AttributeError, ValueError):
        pass
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "httpcore"):  # one line per probe and per forwarded request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    if not os.path.isfile(script):
        sys.stderr.write("%s: error: the upstream proxy script %s does not exist\n" % (prog, script))
        return 2
    upstream = load_upstream(script)
    try:
        args = upstream_args(upstream, rest, prog)
    except ValueError as exc:  # the upstream's own check of the host and port counts
        sys.stderr.write("%s: error: %s\n" % (prog, exc))
        return 2
    upstream.global_args = args
    import uvicorn
    log.info("wrapping %s: prefill %s, decode %s", script,
             " ".join(backend_key(h, p) for h, p in args.prefiller_instances),
             " ".join(backend_key(h, p) for h, p in args.decoder_instances))
    uvicorn.run(HonestProxy(upstream, ours), host=args.host, port=args.port, timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
