# -*- coding: utf-8 -*-
"""a3proxy.health: the rotation state machine and the /healthcheck decisions."""
from __future__ import annotations

import pytest
from a3proxy import health as h


def test_rotation_leaves_after_the_threshold_and_comes_back():
    b = h.BackendHealth("decode", "10.0.0.3", 6700, threshold=3, now=0.0)
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
    b = h.BackendHealth("prefill", "h", 1, threshold=2, now=0.0)
    for t in range(10):
        assert b.observe(t % 2 == 0, "x", float(t)) is None
    assert b.state == "up"


def test_rotation_never_answering_backend_leaves_too():
    b = h.BackendHealth("prefill", "h", 1, threshold=2, now=0.0)
    assert b.observe(False, "timeout", 1.0) is None and b.state == "unknown"
    assert b.observe(False, "timeout", 2.0) == "remove" and b.state == "down"
    assert b.observe(True, "HTTP 200", 3.0) == "add"


def test_rotation_threshold_one():
    b = h.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    assert b.observe(False, "HTTP 500", 2.0) == "remove"


def test_rotation_rejects_unknown_roles():
    with pytest.raises(ValueError):
        h.BackendHealth("both", "h", 1, threshold=1, now=0.0)


def test_snapshot_fields():
    b = h.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    b.observe(True, "HTTP 200", 1.5)
    snap = b.snapshot(in_rotation=True)
    assert snap == {"role": "decode", "backend": "h:1", "state": "up", "in_rotation": True, "healthy": True,
                    "drained": False, "outstanding_load": 0.0, "inflight_requests": 0,
                    "last_probe_ok": True, "last_probe_time": "1970-01-01T00:00:01.500Z",
                    "last_probe_detail": "HTTP 200", "consecutive_failures": 0,
                    "last_change_time": "1970-01-01T00:00:01.500Z",
                    "last_change_reason": "first /health probe succeeded (HTTP 200)", "request_failures": 0,
                    "last_request_failure": None, "last_request_failure_time": None}


def test_snapshot_load_is_rounded_and_never_negative_zero():
    b = h.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    assert str(b.snapshot(True, outstanding_load=-1e-13)["outstanding_load"]) == "0.0"
    assert b.snapshot(True, outstanding_load=120.07451)["outstanding_load"] == 120.075


def test_a_failed_request_only_marks_the_backend_as_suspect():
    b = h.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
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
    assert h.retried_mid_stream(roles) is want


@pytest.mark.parametrize("trace, want", [
    ([], None),
    ([{"backend": "p:1", "status": None}], "p:1"),                                   # hung or refused prefill
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": None}], "d:1"),  # hung decode
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": None},
      {"backend": "d:1", "status": None}], "d:1"),                                   # retried decode
    ([{"backend": "p:1", "status": 200}, {"backend": "d:1", "status": 200}], "d:1"),  # answered, uselessly
])
def test_culprit(trace, want):
    assert h.culprit(trace) == want


def snap(role, state="up", in_rotation=True, name=None, drained=False):
    b = h.BackendHealth(role, name or role[0], 1, threshold=1, now=0.0)
    if state in ("up", "down"):
        b.observe(True, "HTTP 200", 1.0)
    if state == "down":
        b.observe(False, "HTTP 500", 2.0)
    return b.snapshot(in_rotation, drained=drained, outstanding_load=42.0 if drained else 0.0)


def test_health_ok_with_one_of_each():
    status, body = h.health_decision([snap("prefill"), snap("decode"), snap("decode", "down", False, "d2")])
    assert status == 200
    assert body == {"status": "ok", "healthy_prefill": 1, "healthy_decode": 1, "prefill_instances": 1,
                    "decode_instances": 1}


@pytest.mark.parametrize("snaps, missing, words", [
    ([snap("prefill"), snap("decode", "down", False)], ["decode"], ["d:1", "out of rotation", "HTTP 500"]),
    ([snap("prefill", "unknown"), snap("decode")], ["prefill"], ["not probed yet"]),
    ([snap("prefill"), snap("decode", in_rotation=False)], ["decode"], ["/instances/remove"]),
    ([snap("decode")], ["prefill"], ["no prefill backend is configured"]),
    ([], ["prefill", "decode"], []),
])
def test_health_unavailable_names_what_is_missing(snaps, missing, words):
    status, body = h.health_decision(snaps)
    assert status == 503 and body["status"] == "unavailable" and body["missing"] == missing
    for word in words:
        assert word in body["message"]


def test_a_down_backend_still_in_the_upstream_lists_is_not_healthy():
    status, body = h.health_decision([snap("prefill"), snap("decode", "down", True)])
    assert status == 503 and body["decode_instances"] == 1 and body["healthy_decode"] == 0


def test_a_drained_backend_is_healthy_but_not_usable():
    drained = snap("decode", drained=True)
    assert drained["healthy"] and drained["in_rotation"] and drained["drained"] and drained["outstanding_load"] == 42.0
    assert not h.usable(drained)
    assert h.health_decision([snap("prefill"), snap("decode", name="d2"), drained])[0] == 200


def test_every_decode_drained_is_503_saying_so():
    status, body = h.health_decision([snap("prefill"), snap("decode", drained=True)])
    assert status == 503 and body["missing"] == ["decode"]
    assert "d:1 drained for maintenance (POST /a3/undrain puts it back)" in body["message"]


@pytest.mark.parametrize("snaps, status, body", [
    ([snap("prefill", name="10.0.0.1"), snap("decode", name="10.0.0.2")], 200, {"status": "ok"}),
    ([snap("prefill", name="10.0.0.1"), snap("decode", "down", False, "10.0.0.2")], 503,
     {"status": "unavailable", "missing": ["decode"], "message": "no healthy decode backend in rotation; retry later"}),
    ([snap("prefill", "unknown", name="10.0.0.1")], 503,
     {"status": "unavailable", "missing": ["prefill", "decode"],
      "message": "no healthy prefill and no healthy decode backend in rotation; retry later"}),
])
def test_the_public_health_names_no_backend(snaps, status, body):
    assert h.public_health(snaps) == (status, body)
    assert "10.0.0" not in str(h.public_health(snaps))
