# -*- coding: utf-8 -*-
"""a3proxy.metrics, pinned whole: the complete Prometheus text of /metrics (every HELP and TYPE line, the order of
the series, the escaping of labels) for a full set of inputs, and the series left out when their input is."""
from __future__ import annotations

from a3proxy import health as h
from a3proxy import metrics as m

FULL = [
    '# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.',
    '# TYPE process_start_time_seconds gauge',
    'process_start_time_seconds 1700000000',
    '# HELP a3_proxy_requests_total Requests of the public l'
    'istener by endpoint and the HTTP status the client got.',
    '# TYPE a3_proxy_requests_total counter',
    'a3_proxy_requests_total{endpoint="/v1/completions",code="200"} 5',
    'a3_proxy_requests_total{endpoint="/v1/completions",code="499"} 1',
    'a3_proxy_requests_total{endpoint="/v1/models",code="503"} 2',
    '# HELP a3_proxy_open_requests Client requests open on the public listener.',
    '# TYPE a3_proxy_open_requests gauge',
    'a3_proxy_open_requests 0',
    '# HELP a3_proxy_backend_up 1 when the backend is healthy and in the upstream rotation, else 0.',
    '# TYPE a3_proxy_backend_up gauge',
    'a3_proxy_backend_up{role="decode",backend="d\\"\\\\:1"} 1',
    'a3_proxy_backend_up{role="decode",backend="e:1"} 0',
    'a3_proxy_backend_up{role="prefill",backend="p:1"} 0',
    '# HELP a3_proxy_backend_drained 1 while the backend is drained for maintenance (/a3/drain).',
    '# TYPE a3_proxy_backend_drained gauge',
    'a3_proxy_backend_drained{role="decode",backend="d\\"\\\\:1"} 0',
    'a3_proxy_backend_drained{role="decode",backend="e:1"} 0',
    'a3_proxy_backend_drained{role="prefill",backend="p:1"} 1',
    '# HELP a3_proxy_backend_consecutive_failures Consecutive failed /health probes of the backend.',
    '# TYPE a3_proxy_backend_consecutive_failures gauge',
    'a3_proxy_backend_consecutive_failures{role="decode",backend="d\\"\\\\:1"} 1',
    'a3_proxy_backend_consecutive_failures{role="decode",backend="e:1"} 0',
    'a3_proxy_backend_consecutive_failures{role="prefill",backend="p:1"} 1',
    '# HELP a3_proxy_backend_request_failures_total Client r'
    'equests that failed or timed out waiting on the backend.',
    '# TYPE a3_proxy_backend_request_failures_total counter',
    'a3_proxy_backend_request_failures_total{role="decode",backend="d\\"\\\\:1"} 0',
    'a3_proxy_backend_request_failures_total{role="decode",backend="e:1"} 2',
    'a3_proxy_backend_request_failures_total{role="prefill",backend="p:1"} 0',
    '# HELP a3_proxy_backend_inflight_requests Client requests open'
    ' that the proxy engine sent, or chose to send, to the backend.',
    '# TYPE a3_proxy_backend_inflight_requests gauge',
    'a3_proxy_backend_inflight_requests{role="decode",backend="d\\"\\\\:1"} 0',
    'a3_proxy_backend_inflight_requests{role="decode",backend="e:1"} 0',
    'a3_proxy_backend_inflight_requests{role="prefill",backend="p:1"} 4',
    "# HELP a3_proxy_backend_client_errors_total A backend's 4xx answers passed on to the client (not retried).",
    '# TYPE a3_proxy_backend_client_errors_total counter',
    'a3_proxy_backend_client_errors_total 0',
    '# HELP a3_proxy_body_timeouts_total Requests refused with 408 (body not sent within the body timeout).',
    '# TYPE a3_proxy_body_timeouts_total counter',
    'a3_proxy_body_timeouts_total 0',
    '# HELP a3_proxy_body_too_large_total Requests refused with 413 (body over the limit).',
    '# TYPE a3_proxy_body_too_large_total counter',
    'a3_proxy_body_too_large_total 0',
    '# HELP a3_proxy_busy_total Requests refused with 503 because the open-request limit was reached.',
    '# TYPE a3_proxy_busy_total counter',
    'a3_proxy_busy_total 3',
    '# HELP a3_proxy_empty_200_blocked_total Empty HTTP 200 answers of the proxy engine turned into 502.',
    '# TYPE a3_proxy_empty_200_blocked_total counter',
    'a3_proxy_empty_200_blocked_total 0',
    '# HELP a3_proxy_first_byte_timeouts_total Completions cancelled because no first byte came in time (503).',
    '# TYPE a3_proxy_first_byte_timeouts_total counter',
    'a3_proxy_first_byte_timeouts_total 0',
    '# HELP a3_proxy_header_timeouts_total Connections closed b'
    'ecause the headers did not come within the header timeout.',
    '# TYPE a3_proxy_header_timeouts_total counter',
    'a3_proxy_header_timeouts_total 0',
    '# HELP a3_proxy_idle_timeouts_total Answers that stalled after their first byte longer than the idle timeout.',
    '# TYPE a3_proxy_idle_timeouts_total counter',
    'a3_proxy_idle_timeouts_total 0',
    '# HELP a3_proxy_kv_transfer_params_dropped_total Client requests whose kv_transfer_params were dropped.',
    '# TYPE a3_proxy_kv_transfer_params_dropped_total counter',
    'a3_proxy_kv_transfer_params_dropped_total 0',
    "# HELP a3_proxy_load_released_total Bookings of the proxy engine's load counters released at a request's end.",
    '# TYPE a3_proxy_load_released_total counter',
    'a3_proxy_load_released_total 0',
    '# HELP a3_proxy_no_backend_total Completions refused at once with 503: no healthy prefill or decode backend.',
    '# TYPE a3_proxy_no_backend_total counter',
    'a3_proxy_no_backend_total 0',
    '# HELP a3_proxy_not_completion_blocked_total HTTP 200 answers without choices turned into 502.',
    '# TYPE a3_proxy_not_completion_blocked_total counter',
    'a3_proxy_not_completion_blocked_total 0',
    '# HELP a3_proxy_not_found_total Requests for a path the listener does not serve (404).',
    '# TYPE a3_proxy_not_found_total counter',
    'a3_proxy_not_found_total 0',
    '# HELP a3_proxy_rotation_changes_total Backends taken out of or put back into the upstream rotation.',
    '# TYPE a3_proxy_rotation_changes_total counter',
    'a3_proxy_rotation_changes_total 0',
    '# HELP a3_proxy_stream_interrupted_total Streams cut midway, closed with an error event and [DONE].',
    '# TYPE a3_proxy_stream_interrupted_total counter',
    'a3_proxy_stream_interrupted_total 0',
    '# HELP a3_proxy_unauthorized_total Requests refused with 401 (no or a wrong bearer token).',
    '# TYPE a3_proxy_unauthorized_total counter',
    'a3_proxy_unauthorized_total 12',
    '# HELP a3_proxy_upstream_errors_total Failures of the proxy engine or a backend turned into 502.',
    '# TYPE a3_proxy_upstream_errors_total counter',
    'a3_proxy_upstream_errors_total 0',
    "# HELP a3_proxy_etcd_read_ok 1 when the last read of the workers' registrations in etcd worked.",
    '# TYPE a3_proxy_etcd_read_ok gauge',
    'a3_proxy_etcd_read_ok 0',
    "# HELP a3_proxy_ds_worker_registered 1 when the datasystem worker's etcd key says ready, else 0.",
    '# TYPE a3_proxy_ds_worker_registered gauge',
    'a3_proxy_ds_worker_registered{worker="a:1"} 0',
    'a3_proxy_ds_worker_registered{worker="w\\n"} 1',
]


def _snap(role, name, failed=True, **kw):
    b = h.BackendHealth(role, name, 1, 9, 0.0)
    b.observe(True, "x", 1.0)
    if failed:
        b.observe(False, "y", 2.0)
    return b


def test_the_whole_text():
    suspect = _snap("decode", "e", failed=False)
    suspect.request_failed("z", 3.0)
    suspect.request_failed("z", 3.0)
    snapshots = [_snap("prefill", "p").snapshot(True, drained=True, inflight_requests=4), suspect.snapshot(False),
                 _snap("decode", 'd"\\').snapshot(True)]
    text = m.render_metrics({("/v1/completions", 499): 1, ("/v1/models", 503): 2, ("/v1/completions", "200"): 5},
                            snapshots, {"a3_proxy_busy_total": 3, "a3_proxy_unauthorized_total": 12},
                            start_time=1700000000.9, ds_workers={"w\n": 1, "a:1": 0}, etcd_ok=False,
                            open_requests=0)
    assert text.splitlines() == FULL
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_an_empty_text_has_the_headers_and_the_counters_only():
    per_backend = ("a3_proxy_backend_up ", "a3_proxy_backend_drained ", "a3_proxy_backend_consecutive_failures ",
                   "a3_proxy_backend_request_failures_total ", "a3_proxy_backend_inflight_requests ")
    headers = [line for line in FULL if line.startswith("#") and any(name in line for name in per_backend)]
    assert len(headers) == 10
    first, last = FULL.index("# HELP a3_proxy_backend_client_errors_total A backend's 4xx answers passed on to the "
                             "client (not retried)."), FULL.index("# HELP a3_proxy_etcd_read_ok 1 when the last read "
                                                                  "of the workers' registrations in etcd worked.")
    counters = [{"a3_proxy_busy_total 3": "a3_proxy_busy_total 0",
                 "a3_proxy_unauthorized_total 12": "a3_proxy_unauthorized_total 0"}.get(line, line)
                for line in FULL[first:last]]
    assert len(counters) == 51
    assert m.render_metrics({}, [], {}).splitlines() == FULL[3:5] + headers + counters


def test_snapshots_without_the_optional_fields():
    snap = {"role": "decode", "backend": "b:1", "healthy": True, "in_rotation": True, "consecutive_failures": 2}
    lines = m.render_metrics({}, [snap], {}, etcd_ok=True).splitlines()
    assert [line for line in lines if not line.startswith("#") and "b:1" in line] == [
        'a3_proxy_backend_up{role="decode",backend="b:1"} 1',
        'a3_proxy_backend_drained{role="decode",backend="b:1"} 0',
        'a3_proxy_backend_consecutive_failures{role="decode",backend="b:1"} 2',
        'a3_proxy_backend_request_failures_total{role="decode",backend="b:1"} 0',
        'a3_proxy_backend_inflight_requests{role="decode",backend="b:1"} 0']
    assert lines[-1] == "a3_proxy_etcd_read_ok 1"


def test_the_label_escaping():
    assert m._label('a\\b\nc"d') == 'a\\\\b\\nc\\"d'  # pylint: disable=protected-access
    assert m._label(5) == "5"  # pylint: disable=protected-access
