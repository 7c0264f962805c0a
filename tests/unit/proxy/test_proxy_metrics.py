# -*- coding: utf-8 -*-
"""a3proxy.metrics: the Prometheus text of /metrics."""
from __future__ import annotations

from a3proxy import health as h
from a3proxy import metrics as m


def snap(role, state="up", in_rotation=True, drained=False, inflight=0):
    b = h.BackendHealth(role, role[0], 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    if state == "down":
        b.observe(False, "HTTP 500", 2.0)
    return b.snapshot(in_rotation, drained=drained, inflight_requests=inflight)


def test_metrics_text():
    text = m.render_metrics({("/v1/completions", "200"): 3, ("/v1/chat/completions", "503"): 1},
                            [snap("prefill", inflight=2), snap("decode", "down", False)],
                            {"a3_proxy_empty_200_blocked_total": 2, "a3_proxy_unauthorized_total": 5})
    lines = text.splitlines()
    assert 'a3_proxy_requests_total{endpoint="/v1/completions",code="200"} 3' in lines
    assert 'a3_proxy_requests_total{endpoint="/v1/chat/completions",code="503"} 1' in lines
    assert 'a3_proxy_backend_up{role="prefill",backend="p:1"} 1' in lines
    assert 'a3_proxy_backend_up{role="decode",backend="d:1"} 0' in lines
    assert 'a3_proxy_backend_inflight_requests{role="prefill",backend="p:1"} 2' in lines
    assert "a3_proxy_empty_200_blocked_total 2" in lines and "a3_proxy_unauthorized_total 5" in lines
    for name in ("a3_proxy_first_byte_timeouts_total", "a3_proxy_idle_timeouts_total", "a3_proxy_busy_total",
                 "a3_proxy_body_too_large_total", "a3_proxy_header_timeouts_total", "a3_proxy_body_timeouts_total",
                 "a3_proxy_backend_client_errors_total", "a3_proxy_kv_transfer_params_dropped_total",
                 "a3_proxy_load_released_total", "a3_proxy_not_found_total"):
        assert "%s 0" % name in lines and "# TYPE %s counter" % name in lines
    assert 'a3_proxy_backend_request_failures_total{role="decode",backend="d:1"} 0' in lines
    assert "# TYPE a3_proxy_backend_up gauge" in lines
    assert "a3_proxy_open_requests" not in text
    for line in lines:
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2


def test_metrics_open_requests():
    assert "a3_proxy_open_requests 4" in m.render_metrics({}, [], {}, open_requests=4).splitlines()


def test_metrics_carry_the_process_start_time():
    text = m.render_metrics({}, [], {}, start_time=1700000000.7)
    assert "# TYPE process_start_time_seconds gauge" in text.splitlines()
    assert "process_start_time_seconds 1700000000" in text.splitlines()
    assert "process_start_time_seconds" not in m.render_metrics({}, [], {})


def test_metrics_labels_are_escaped():
    text = m.render_metrics({('/v1/"x"', "200"): 1}, [], {})
    assert 'endpoint="/v1/\\"x\\""' in text


def test_metrics_of_the_ds_workers():
    text = m.render_metrics({}, [], {}, ds_workers={"b:1": 0, "a:1": 1}, etcd_ok=True).splitlines()
    assert text.index('a3_proxy_ds_worker_registered{worker="a:1"} 1') < text.index(
        'a3_proxy_ds_worker_registered{worker="b:1"} 0')
    assert "a3_proxy_etcd_read_ok 1" in text and "# TYPE a3_proxy_ds_worker_registered gauge" in text
    failed = m.render_metrics({}, [], {}, ds_workers=None, etcd_ok=False)
    assert "a3_proxy_etcd_read_ok 0" in failed and "a3_proxy_ds_worker_registered" not in failed
    plain = m.render_metrics({}, [], {})
    assert "a3_proxy_etcd_read_ok" not in plain and "a3_proxy_ds_worker_registered" not in plain


def test_metrics_export_the_drain_and_the_backend_is_not_up():
    lines = m.render_metrics({}, [snap("prefill"), snap("decode", drained=True)], {}).splitlines()
    assert 'a3_proxy_backend_drained{role="decode",backend="d:1"} 1' in lines
    assert 'a3_proxy_backend_drained{role="prefill",backend="p:1"} 0' in lines
    assert 'a3_proxy_backend_up{role="decode",backend="d:1"} 0' in lines
