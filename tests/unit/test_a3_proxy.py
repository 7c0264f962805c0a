# -*- coding: utf-8 -*-
"""The decision functions of the honest proxy wrapper (roles/proxy/files/a3_proxy.py).

Plain Python, no fastapi/httpx/uvicorn needed: the wrapper imports those only when it runs. The live
behaviour around the real upstream proxy is tested in tests/sim/test_honest_proxy.py.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[2] / "roles" / "proxy" / "files" / "a3_proxy.py"


def _load():
    spec = importlib.util.spec_from_file_location("a3_proxy_under_test", WRAPPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


a3 = _load()
COMPLETION = json.dumps({"id": "x", "choices": [{"index": 0, "message": {"content": "hi"}}],
                         "usage": {"completion_tokens": 1}}).encode()


def test_imports_without_the_web_stack():
    code = ("import sys, importlib.util\n"
            "for name in ('fastapi', 'starlette', 'httpx', 'uvicorn'):\n"
            "    sys.modules[name] = None  # any import of them fails\n"
            "spec = importlib.util.spec_from_file_location('m', %r)\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(m.classify_answer(200, b'').code)\n" % str(WRAPPER))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "502"


# ----------------------------------------------------------------------------- command line

def test_split_keeps_the_upstream_arguments_in_order():
    argv = ["--port", "8088", "--a3-probe-interval", "1.5", "--prefiller-hosts", "a", "b", "--a3-fail-threshold=4",
            "--prefiller-ports", "1", "2", "--decoder-hosts", "c", "--decoder-ports", "3", "--max-retries", "3"]
    ours, rest = a3.split_argv(argv)
    assert ours.a3_probe_interval == 1.5 and ours.a3_fail_threshold == 4
    assert rest == ["--port", "8088", "--prefiller-hosts", "a", "b", "--prefiller-ports", "1", "2",
                    "--decoder-hosts", "c", "--decoder-ports", "3", "--max-retries", "3"]


def test_split_defaults():
    ours, rest = a3.split_argv([])
    assert rest == []
    assert (ours.a3_probe_interval, ours.a3_probe_timeout, ours.a3_fail_threshold, ours.a3_first_byte_timeout,
            ours.a3_retry_after, ours.a3_upstream_script) == (5.0, 2.0, 3, 300.0, 10, None)


@pytest.mark.parametrize("argv, text", [
    (["--a3-probe-intervall", "1"], "unrecognized arguments: --a3-probe-intervall"),
    (["--a3-probe", "1"], "unrecognized arguments: --a3-probe"),           # no abbreviations
    (["--a3-probe-interval", "0"], "greater than 0"),
    (["--a3-probe-timeout", "-1"], "greater than 0"),
    (["--a3-fail-threshold", "0"], "at least 1"),
    (["--a3-retry-after", "x"], "invalid integer value: 'x'"),
    (["--a3-probe-interval", "soon"], "invalid number value: 'soon'"),
    (["--a3-first-byte-timeout"], "expected one argument"),
])
def test_split_rejects_bad_options(argv, text):
    with pytest.raises(a3.UsageError, match=text):
        a3.split_argv(argv)


def test_unknown_upstream_options_are_left_to_the_upstream_parser():
    _unused, rest = a3.split_argv(["--bogus", "1"])
    assert rest == ["--bogus", "1"]


def test_wants_help():
    assert a3.wants_help(["--port", "1", "-h"]) and a3.wants_help(["--help"])
    assert not a3.wants_help(["--port", "1"])


# ----------------------------------------------------------------------------- answers

def test_error_body_is_openai_style():
    assert a3.error_body("m", "ServiceUnavailableError", 503) == {
        "error": {"message": "m", "type": "ServiceUnavailableError", "code": 503}}


@pytest.mark.parametrize("status, body, kind", [
    (200, b"", "empty_200"),
    (200, b"  \n", "empty_200"),
    (200, b"null", "not_completion"),
    (200, b"not json", "not_completion"),
    (200, b'{"id": "x"}', "not_completion"),
    (200, b'{"choices": []}', "not_completion"),
    (200, b'{"error": {"message": "boom"}}', "upstream_error"),
    (500, b"Internal Server Error", "upstream_status"),
    (500, b'{"error": {"message": "engine dead"}}', "upstream_status"),
    (503, b"", "upstream_status"),
    (404, b"<html>not found</html>", "upstream_status"),
    (302, b"", "upstream_status"),
    (None, b"", "upstream_error"),
])
def test_classify_blocks_what_is_not_an_answer(status, body, kind):
    verdict = a3.classify_answer(status, body)
    assert not verdict.passed and verdict.code == 502 and verdict.kind == kind and verdict.message


def test_classify_passes_completions_and_backend_4xx_json_errors():
    assert a3.classify_answer(200, COMPLETION).passed
    assert a3.classify_answer(404, b'{"error": {"message": "The model `x` does not exist."}}').passed
    assert a3.classify_answer(400, b'{"error": "bad"}').passed
    assert a3.classify_answer(422, b'{"detail": [{"msg": "field required"}]}').passed


def test_classify_messages_name_the_cause():
    assert "engine dead" in a3.classify_answer(500, b'{"error": {"message": "engine dead"}}').message
    assert "HTTP 500" in a3.classify_answer(500, b"Internal Server Error").message
    msg = a3.classify_answer(500, b"Internal Server Error", "ConnectError: All connection attempts failed").message
    assert msg == "the proxy engine answered HTTP 500: ConnectError: All connection attempts failed"
    msg = a3.classify_answer(None, b"", "ReadError: boom").message
    assert "ReadError: boom" in msg
    assert "empty body" in a3.classify_answer(200, b"").message
    assert len(a3.classify_answer(200, b"x" * 5000).message) < 500  # snippets are short


@pytest.mark.parametrize("previous, sep", [(b"", b""), (b"data: {}\n\n", b""), (b"data: {}\n", b"\n"),
                                           (b'data: {"cho', b"\n\n")])
def test_sse_error_tail(previous, sep):
    tail = a3.sse_error_tail("cut", previous)
    assert tail.startswith(sep + b"data: {")
    events = [ln[6:] for ln in (previous + tail).decode().split("\n") if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2]) == {"error": {"message": "cut", "type": "BadGatewayError", "code": 502}}


def test_done_tracker_finds_done_split_across_chunks():
    t = a3.DoneTracker()
    for chunk in (b"data: {}\n\n", b"data: [DO", b"NE]\n\n"):
        t.feed(chunk)
    assert t.done and t.data
    t = a3.DoneTracker()
    t.feed(b"data: {}\n\n")
    assert not t.done and t.data
    t = a3.DoneTracker()
    t.feed(b"\n")
    assert not t.data


# ----------------------------------------------------------------------------- rotation state machine

def test_rotation_leaves_after_the_threshold_and_comes_back():
    b = a3.BackendHealth("decode", "10.0.0.3", 6700, threshold=3, now=0.0)
    assert b.key == "10.0.0.3:6700" and b.state == "unknown"
    assert b.observe(True, "HTTP 200", 1.0) is None and b.state == "up"
    assert b.observe(False, "HTTP 503", 2.0) is None and b.state == "up" and b.failures == 1
    assert b.observe(False, "HTTP 503", 3.0) is None and b.failures == 2
    assert b.observe(False, "ConnectError: refused", 4.0) == "remove"
    assert b.state == "down" and b.last_change_time == 4.0
    assert "3 consecutive failed /health probes" in b.last_change_reason and "refused" in b.last_change_reason
    assert b.observe(False, "ConnectError: refused", 5.0) is None and b.failures == 4  # removed once
    assert b.observe(True, "HTTP 200", 6.0) == "add"
    assert b.state == "up" and b.failures == 0 and "answers again" in b.last_change_reason
    assert b.observe(True, "HTTP 200", 7.0) is None and b.last_change_time == 6.0


def test_rotation_a_success_resets_the_count():
    b = a3.BackendHealth("prefill", "h", 1, threshold=2, now=0.0)
    for t in range(10):
        assert b.observe(t % 2 == 0, "x", float(t)) is None
    assert b.state == "up"


def test_rotation_never_answering_backend_leaves_too():
    b = a3.BackendHealth("prefill", "h", 1, threshold=2, now=0.0)
    assert b.observe(False, "timeout", 1.0) is None and b.state == "unknown"
    assert b.observe(False, "timeout", 2.0) == "remove" and b.state == "down"
    assert b.observe(True, "HTTP 200", 3.0) == "add"


def test_rotation_threshold_one():
    b = a3.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    assert b.observe(False, "HTTP 500", 2.0) == "remove"


def test_rotation_rejects_unknown_roles():
    with pytest.raises(ValueError):
        a3.BackendHealth("both", "h", 1, threshold=1, now=0.0)


def test_snapshot_fields():
    b = a3.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.5)
    snap = b.snapshot(in_rotation=True)
    assert snap == {"role": "decode", "backend": "h:1", "state": "up", "in_rotation": True, "healthy": True,
                    "drained": False, "outstanding_load": 0.0, "inflight_requests": 0,
                    "last_probe_ok": True, "last_probe_time": "1970-01-01T00:00:01.500Z",
                    "last_probe_detail": "HTTP 200", "consecutive_failures": 0,
                    "last_change_time": "1970-01-01T00:00:01.500Z",
                    "last_change_reason": "first /health probe succeeded (HTTP 200)", "request_failures": 0,
                    "last_request_failure": None, "last_request_failure_time": None}


def test_a_failed_request_only_marks_the_backend_as_suspect():
    b = a3.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    b.request_failed("no first byte within 2s", 3.0)
    b.request_failed("empty_200", 4.0)
    snap = b.snapshot(in_rotation=True)
    assert snap["request_failures"] == 2 and snap["last_request_failure"] == "empty_200"
    assert snap["last_request_failure_time"] == "1970-01-01T00:00:04.000Z"
    assert b.state == "up" and b.failures == 0  # the rotation follows the probes alone


@pytest.mark.parametrize("roles, want", [
    ([], False),
    (["decode"], True),                      # the upstream re-sent the decode request after a cut
    ([None, "decode"], True),                # an unknown backend first (added elsewhere)
    (["prefill", "decode"], False),          # its "recomputed" continuation: a new prefill first
])
def test_retried_mid_stream(roles, want):
    assert a3.retried_mid_stream(roles) is want


@pytest.mark.parametrize("trace, want", [
    ([], None),
    ([{"backend": "p:1", "status": None}], "p:1"),                                   # hung or refused prefill
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": None}], "d:1"),  # hung decode
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": None},
      {"backend": "d:1", "status": None}], "d:1"),                                   # retried decode
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": 200}], "d:1"),  # answered, uselessly
])
def test_culprit(trace, want):
    assert a3.culprit(trace) == want


# ----------------------------------------------------------------------------- /healthcheck

def _snap(role, state="up", in_rotation=True, name=None):
    b = a3.BackendHealth(role, name or role[0], 1, threshold=1, now=0.0)
    if state in ("up", "down"):
        b.observe(True, "HTTP 200", 1.0)
    if state == "down":
        b.observe(False, "HTTP 500", 2.0)
    return b.snapshot(in_rotation)


def test_health_ok_with_one_of_each():
    status, body = a3.health_decision([_snap("prefill"), _snap("decode"), _snap("decode", "down", False, "d2")])
    assert status == 200
    assert body == {"status": "ok", "healthy_prefill": 1, "healthy_decode": 1, "prefill_instances": 1,
                    "decode_instances": 1}


@pytest.mark.parametrize("snaps, missing, words", [
    ([_snap("prefill"), _snap("decode", "down", False)], ["decode"], ["d:1", "out of rotation", "HTTP 500"]),
    ([_snap("prefill", "unknown"), _snap("decode")], ["prefill"], ["not probed yet"]),
    ([_snap("prefill"), _snap("decode", in_rotation=False)], ["decode"], ["/instances/remove"]),
    ([_snap("decode")], ["prefill"], ["no prefill backend is configured"]),
    ([], ["prefill", "decode"], []),
])
def test_health_unavailable_names_what_is_missing(snaps, missing, words):
    status, body = a3.health_decision(snaps)
    assert status == 503 and body["status"] == "unavailable" and body["missing"] == missing
    for word in words:
        assert word in body["message"]


def test_a_down_backend_still_in_the_upstream_lists_is_not_healthy():
    status, body = a3.health_decision([_snap("prefill"), _snap("decode", "down", True)])
    assert status == 503 and body["decode_instances"] == 1 and body["healthy_decode"] == 0


# ----------------------------------------------------------------------------- /metrics

def test_metrics_text():
    text = a3.render_metrics({("/v1/completions", "200"): 3, ("/v1/chat/completions", "503"): 1},
                             [_snap("prefill"), _snap("decode", "down", False)],
                             {"a3_proxy_empty_200_blocked_total": 2})
    lines = text.splitlines()
    assert 'a3_proxy_requests_total{endpoint="/v1/completions",code="200"} 3' in lines
    assert 'a3_proxy_requests_total{endpoint="/v1/chat/completions",code="503"} 1' in lines
    assert 'a3_proxy_backend_up{role="prefill",backend="p:1"} 1' in lines
    assert 'a3_proxy_backend_up{role="decode",backend="d:1"} 0' in lines
    assert "a3_proxy_empty_200_blocked_total 2" in lines
    assert "a3_proxy_first_byte_timeouts_total 0" in lines
    assert 'a3_proxy_backend_request_failures_total{role="decode",backend="d:1"} 0' in lines
    assert "# TYPE a3_proxy_backend_up gauge" in lines
    for line in lines:
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2


def test_metrics_carry_the_process_start_time():
    text = a3.render_metrics({}, [], {}, start_time=1700000000.7)
    assert "# TYPE process_start_time_seconds gauge" in text.splitlines()
    assert "process_start_time_seconds 1700000000" in text.splitlines()
    assert "process_start_time_seconds" not in a3.render_metrics({}, [], {})


def test_metrics_labels_are_escaped():
    text = a3.render_metrics({('/v1/"x"', "200"): 1}, [], {})
    assert 'endpoint="/v1/\\"x\\""' in text


# ----------------------------------------------------------------------------- datasystem workers in etcd

def _kv(key, value):
    import base64
    return {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value.encode()).decode()}


def test_ds_range_request_covers_the_prefix():
    import base64
    body = a3.ds_range_request()
    assert base64.b64decode(body["key"]) == b"/datasystem/cluster/"
    assert base64.b64decode(body["range_end"]) == b"/datasystem/cluster0"  # the prefix with its last byte + 1


def test_ds_worker_states():
    answer = {"kvs": [_kv("/datasystem/cluster/127.0.0.1:18481", "1700000000;ready"),
                      _kv("/datasystem/cluster/127.0.0.2:18481", "1700000000;start;host-b"),
                      _kv("/datasystem/cluster/127.0.0.9:18481", "1700000000;ready;host-x"),
                      _kv("/datasystem/other/127.0.0.3:18481", "1;ready")]}
    states = a3.ds_worker_states(answer, ["127.0.0.1:18481", "127.0.0.2:18481", "127.0.0.3:18481"])
    assert states == {"127.0.0.1:18481": 1,   # ready
                      "127.0.0.2:18481": 0,   # registered, not ready yet
                      "127.0.0.3:18481": 0,   # not registered (a key outside the prefix does not count)
                      "127.0.0.9:18481": 1}   # registered, not expected: reported as well


def test_ds_worker_states_of_an_empty_answer():
    # etcd leaves out "kvs" when nothing matches
    assert a3.ds_worker_states({"header": {}}, ["a:1"]) == {"a:1": 0}
    assert a3.ds_worker_states(None, []) == {}


def test_ds_worker_options():
    ours, rest = a3.split_argv(["--a3-etcd", "127.0.0.1:2379", "--a3-ds-worker", "a:1", "--a3-ds-worker", "b:1"])
    assert rest == [] and ours.a3_etcd == "127.0.0.1:2379" and ours.a3_ds_worker == ["a:1", "b:1"]
    ours, _unused = a3.split_argv([])
    assert ours.a3_etcd is None and ours.a3_ds_worker == []


def test_metrics_of_the_ds_workers():
    text = a3.render_metrics({}, [], {}, ds_workers={"b:1": 0, "a:1": 1}, etcd_ok=True).splitlines()
    assert text.index('a3_proxy_ds_worker_registered{worker="a:1"} 1') < text.index(
        'a3_proxy_ds_worker_registered{worker="b:1"} 0')
    assert "a3_proxy_etcd_read_ok 1" in text and "# TYPE a3_proxy_ds_worker_registered gauge" in text
    failed = a3.render_metrics({}, [], {}, ds_workers=None, etcd_ok=False)
    assert "a3_proxy_etcd_read_ok 0" in failed and "a3_proxy_ds_worker_registered" not in failed
    plain = a3.render_metrics({}, [], {})
    assert "a3_proxy_etcd_read_ok" not in plain and "a3_proxy_ds_worker_registered" not in plain


# ----------------------------------------------------------------------------- drain for maintenance

class _Server(object):
    def __init__(self, host, port, tokens=0.0, kv=0.0):
        self.host, self.port, self.active_tokens, self.active_kv_cache = host, port, tokens, kv


def test_parse_backend_list_names_known_backends_once_sorted():
    known = ["h2:2", "h1:1", "h3:3"]
    assert a3.parse_backend_list(b'{"backends": ["h2:2", "h1:1", "h2:2"]}', known) == ["h1:1", "h2:2"]


@pytest.mark.parametrize("body", [b"", b"[]", b'{"backends": []}', b'{"backends": "h1:1"}',
                                  b'{"backends": [1]}', b'{"backend": ["h1:1"]}', b"not json"])
def test_parse_backend_list_refuses_a_bad_body(body):
    with pytest.raises(ValueError, match=r'\{"backends": \["host:port"'):
        a3.parse_backend_list(body, ["h1:1"])


def test_parse_backend_list_names_the_unknown_and_the_known():
    with pytest.raises(ValueError) as err:
        a3.parse_backend_list(b'{"backends": ["h1:1", "x:9", "y:8"]}', ["h1:1", "h2:2"])
    assert str(err.value) == "unknown backends x:9, y:8: the proxy has h1:1, h2:2"


def test_choose_undrained_takes_the_least_loaded_server_that_is_not_drained():
    servers = [_Server("a", 1, tokens=0.0), _Server("b", 2, tokens=50.0), _Server("c", 3, tokens=900.0)]
    assert a3.choose_undrained(servers, set(), [], "decode") == 0
    assert a3.choose_undrained(servers, {"a:1"}, [], "decode") == 1  # the least loaded is drained: the next one
    assert a3.choose_undrained(servers, {"a:1"}, [servers[1]], "decode") == 2  # tainted by the upstream too
    assert a3.choose_undrained(servers, {"a:1", "b:2", "c:3"}, [], "decode") is None


def test_choose_undrained_weighs_prefill_kv_like_the_upstream_and_breaks_ties_by_index():
    servers = [_Server("a", 1, tokens=10.0, kv=100.0), _Server("b", 2, tokens=30.0, kv=0.0), _Server("c", 3, tokens=30.0)]
    assert a3.choose_undrained(servers, set(), [], "prefill") == 1  # 10 + 0.3 x 100 = 40 > 30
    assert a3.choose_undrained(servers, set(), [], "decode") == 0   # decode ignores the KV held
    assert a3.choose_undrained(servers, {"a:1"}, [], "decode") == 1  # b and c tie: the lower index


def test_outstanding_load_counts_prefill_kv_until_decode_pulled_it():
    assert a3.outstanding_load(_Server("p", 1, tokens=0.0, kv=120.5), "prefill") == 120.5
    assert a3.outstanding_load(_Server("d", 1, tokens=30.0, kv=99.0), "decode") == 30.0
    assert a3.outstanding_load(_Server("d", 1, tokens=1e-14), "decode") < a3.IDLE_LOAD


def _drained(role, name=None):
    b = a3.BackendHealth(role, name or role[0], 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    return b.snapshot(True, drained=True, outstanding_load=42.0)


def test_a_drained_backend_is_healthy_but_not_usable():
    snap = _drained("decode")
    assert snap["healthy"] and snap["in_rotation"] and snap["drained"] and snap["outstanding_load"] == 42.0
    assert not a3.usable(snap)
    assert a3.health_decision([_snap("prefill"), _snap("decode", name="d2"), snap])[0] == 200


def test_every_decode_drained_is_503_saying_so():
    status, body = a3.health_decision([_snap("prefill"), _drained("decode")])
    assert status == 503 and body["missing"] == ["decode"]
    assert "d:1 drained for maintenance (POST /a3/undrain puts it back)" in body["message"]


def test_metrics_export_the_drain_and_the_backend_is_not_up():
    lines = a3.render_metrics({}, [_snap("prefill"), _drained("decode")], {}).splitlines()
    assert 'a3_proxy_backend_drained{role="decode",backend="d:1"} 1' in lines
    assert 'a3_proxy_backend_drained{role="prefill",backend="p:1"} 0' in lines
    assert 'a3_proxy_backend_up{role="decode",backend="d:1"} 0' in lines
