# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The Prometheus text of GET /metrics (admin listener)."""

from .health import usable

COUNTERS = {
    "a3_proxy_empty_200_blocked_total": "Empty HTTP 200 answers of the proxy engine turned into 502.",
    "a3_proxy_first_byte_timeouts_total": "Completions cancelled because no first byte came in time (503).",
    "a3_proxy_not_completion_blocked_total": "HTTP 200 answers without choices turned into 502.",
    "a3_proxy_upstream_errors_total": "Failures of the proxy engine or a backend turned into 502.",
    "a3_proxy_no_backend_total": "Completions refused at once with 503: no healthy prefill or decode backend.",
    "a3_proxy_stream_interrupted_total": "Streams cut midway, closed with an error event and [DONE].",
    "a3_proxy_rotation_changes_total": "Backends taken out of or put back into the upstream rotation.",
    "a3_proxy_idle_timeouts_total": "Answers that stalled after their first byte longer than the idle timeout.",
    "a3_proxy_backend_client_errors_total": "A backend's 4xx answers passed on to the client (not retried).",
    "a3_proxy_unauthorized_total": "Requests refused with 401 (no or a wrong bearer token).",
    "a3_proxy_body_too_large_total": "Requests refused with 413 (body over the limit).",
    "a3_proxy_body_timeouts_total": "Requests refused with 408 (body not sent within the body timeout).",
    "a3_proxy_header_timeouts_total": "Connections closed because the headers did not come within the header timeout.",
    "a3_proxy_busy_total": "Requests refused with 503 because the open-request limit was reached.",
    "a3_proxy_not_found_total": "Requests for a path the listener does not serve (404).",
    "a3_proxy_kv_transfer_params_dropped_total": "Client requests whose kv_transfer_params were dropped.",
    "a3_proxy_load_released_total": "Bookings of the proxy engine's load counters released at a request's end.",
}


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _per_backend(out, name, kind, help_text, snapshots, value):
    out += ["# HELP %s %s" % (name, help_text), "# TYPE %s %s" % (name, kind)]
    for s in sorted(snapshots, key=lambda s: (s["role"], s["backend"])):
        out.append('%s{role="%s",backend="%s"} %s' % (name, s["role"], _label(s["backend"]), value(s)))


def render_metrics(requests, snapshots, counters, start_time=None, ds_workers=None, etcd_ok=None, open_requests=None,
                   extra=()):
    """Prometheus text. requests: {(endpoint, code): n}; counters: {name: n} of the *_total counters (a name whose
    value is None is left out: a counter another process keeps, whose last read failed);
    start_time: the process start (epoch s), exported as process_start_time_seconds (restart alerts);
    ds_workers: {worker: 1 or 0} from ds_worker_states(), None when etcd was not read (the series are left out
    then rather than reported as 0); etcd_ok: whether the last read of etcd worked, None without --a3-etcd;
    open_requests: client requests open on the public listener now (None leaves the gauge out); extra: more lines
    of exposition text, appended as they are (an engine's own series)."""
    out = []
    if start_time is not None:
        out += ["# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
                "# TYPE process_start_time_seconds gauge", "process_start_time_seconds %d" % int(start_time)]
    out += ["# HELP a3_proxy_requests_total Requests of the public listener by endpoint and the HTTP status the "
            "client got.", "# TYPE a3_proxy_requests_total counter"]
    for (endpoint, code), n in sorted(requests.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        out.append('a3_proxy_requests_total{endpoint="%s",code="%s"} %d' % (_label(endpoint), _label(code), n))
    if open_requests is not None:
        out += ["# HELP a3_proxy_open_requests Client requests open on the public listener.",
                "# TYPE a3_proxy_open_requests gauge", "a3_proxy_open_requests %d" % open_requests]
    _per_backend(out, "a3_proxy_backend_up", "gauge", "1 when the backend is healthy and in the upstream rotation, "
                 "else 0.", snapshots, lambda s: 1 if usable(s) else 0)
    _per_backend(out, "a3_proxy_backend_drained", "gauge", "1 while the backend is drained for maintenance "
                 "(/a3/drain).", snapshots, lambda s: 1 if s.get("drained") else 0)
    _per_backend(out, "a3_proxy_backend_consecutive_failures", "gauge", "Consecutive failed /health probes of the "
                 "backend.", snapshots, lambda s: s["consecutive_failures"])
    _per_backend(out, "a3_proxy_backend_request_failures_total", "counter", "Client requests that failed or timed "
                 "out waiting on the backend.", snapshots, lambda s: s.get("request_failures", 0))
    _per_backend(out, "a3_proxy_backend_inflight_requests", "gauge", "Client requests open that the proxy engine "
                 "sent, or chose to send, to the backend.", snapshots, lambda s: s.get("inflight_requests", 0))
    for name in sorted(COUNTERS):
        if name in counters and counters[name] is None:  # a value read from elsewhere that could not be read
            continue
        out += ["# HELP %s %s" % (name, COUNTERS[name]), "# TYPE %s counter" % name,
                "%s %d" % (name, counters.get(name, 0))]
    if etcd_ok is not None:
        out += ["# HELP a3_proxy_etcd_read_ok 1 when the last read of the workers' registrations in etcd worked.",
                "# TYPE a3_proxy_etcd_read_ok gauge", "a3_proxy_etcd_read_ok %d" % (1 if etcd_ok else 0)]
    if ds_workers is not None:
        out += ["# HELP a3_proxy_ds_worker_registered 1 when the datasystem worker's etcd key says ready, else 0.",
                "# TYPE a3_proxy_ds_worker_registered gauge"]
        for worker in sorted(ds_workers):
            out.append('a3_proxy_ds_worker_registered{worker="%s"} %d' % (_label(worker), ds_workers[worker]))
    out += list(extra)
    return "\n".join(out) + "\n"
