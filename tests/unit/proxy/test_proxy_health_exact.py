# -*- coding: utf-8 -*-
"""a3proxy.health, pinned whole: the state machine's reasons, every field of a snapshot, the full and the public
/healthcheck bodies with their exact messages."""
from __future__ import annotations

import pytest
from a3proxy import health as h


@pytest.mark.parametrize("ts, want", [(None, None), (0, "1970-01-01T00:00:00.000Z"),
                                      (1700000000.25, "2023-11-14T22:13:20.250Z"),
                                      (86399.9996, "1970-01-01T23:59:59.999Z")])
def test_iso_time(ts, want):
    assert h.iso_time(ts) == want


def test_backend_key():
    assert h.backend_key("::1", 5) == "::1:5" and h.backend_key("h", "7") == "h:7"


def test_a_new_backend():
    b = h.BackendHealth("prefill", 10, "8000", threshold="2", now=5.0)
    assert (b.role, b.host, b.port, b.threshold, b.key) == ("prefill", "10", 8000, 2, "10:8000")
    assert b.snapshot(False) == {
        "role": "prefill", "backend": "10:8000", "state": "unknown", "in_rotation": False, "drained": False,
        "outstanding_load": 0.0, "inflight_requests": 0, "healthy": False, "last_probe_ok": None,
        "last_probe_time": None, "last_probe_detail": "", "consecutive_failures": 0,
        "last_change_time": "1970-01-01T00:00:05.000Z", "last_change_reason": "listed on the command line",
        "request_failures": 0, "last_request_failure": None, "last_request_failure_time": None}
    assert h.BackendHealth("decode", "h", 1, 1, 0.0, reason="added").last_change_reason == "added"


def test_the_role_is_checked():
    with pytest.raises(ValueError) as err:
        h.BackendHealth("Prefill", "h", 1, 1, 0.0)
    assert str(err.value) == "role must be one of ('prefill', 'decode'), got 'Prefill'"


def test_the_state_machine_step_by_step():
    b = h.BackendHealth("decode", "h", 1, threshold=2, now=0.0)
    steps = [(False, "e1", 1.0, None, "unknown", 1), (False, "e2", 2.0, "remove", "down", 2),
             (False, "e3", 3.0, None, "down", 3), (True, "HTTP 200", 4.0, "add", "up", 0),
             (False, "e4", 5.0, None, "up", 1), (True, "HTTP 200", 6.0, None, "up", 0)]
    for ok, detail, now, action, state, failures in steps:
        assert b.observe(ok, detail, now) == action
        assert (b.state, b.failures, b.last_probe_ok, b.last_probe_time, b.last_probe_detail) == (
            state, failures, ok, now, detail)
    assert b.probes == 6
    assert (b.last_change_time, b.last_change_reason) == (4.0, "/health answers again (HTTP 200)")
    b2 = h.BackendHealth("decode", "h", 1, threshold=2, now=0.0)
    b2.observe(False, "e1", 1.0)
    b2.observe(False, "timed out", 2.0)
    assert (b2.last_change_time, b2.last_change_reason) == (2.0, "2 consecutive failed /health probes "
                                                            "(last: timed out)")
    b3 = h.BackendHealth("decode", "h", 1, threshold=1, now=0.0)
    assert b3.observe(1, "HTTP 204", 1.5) is None and b3.last_probe_ok is True
    assert (b3.state, b3.last_change_time, b3.last_change_reason) == ("up", 1.5,
                                                                      "first /health probe succeeded (HTTP 204)")
    assert b3.observe(0, "x", 2.0) == "remove" and b3.last_probe_ok is False


def test_a_snapshot_of_a_busy_suspect_backend():
    b = h.BackendHealth("decode", "h", 1, threshold=3, now=0.0)
    b.observe(True, "HTTP 200", 1.0)
    b.observe(False, "HTTP 500", 2.0)
    b.request_failed("no first byte within 2s", 2.5)
    assert b.snapshot(1, drained=1, outstanding_load=2.0004, inflight_requests=3.0) == {
        "role": "decode", "backend": "h:1", "state": "up", "in_rotation": True, "drained": True,
        "outstanding_load": 2.0, "inflight_requests": 3, "healthy": True, "last_probe_ok": False,
        "last_probe_time": "1970-01-01T00:00:02.000Z", "last_probe_detail": "HTTP 500", "consecutive_failures": 1,
        "last_change_time": "1970-01-01T00:00:01.000Z", "last_change_reason": "first /health probe succeeded "
        "(HTTP 200)",
        "request_failures": 1, "last_request_failure": "no first byte within 2s",
        "last_request_failure_time": "1970-01-01T00:00:02.500Z"}


def snap(role, name, state="up", in_rotation=True, drained=False, failures=0):
    b = h.BackendHealth(role, name, 1, threshold=1 if state == "down" else 9, now=0.0)
    if state != "unknown":
        b.observe(True, "HTTP 200", 1.0)
    for i in range(failures):
        b.observe(False, "HTTP 50%d" % i, 2.0 + i)
    return b.snapshot(in_rotation, drained=drained)


@pytest.mark.parametrize("snaps, want", [
    ([snap("prefill", "p"), snap("decode", "d"), snap("decode", "e", in_rotation=False)],
     {"status": "ok", "healthy_prefill": 1, "healthy_decode": 1, "prefill_instances": 1, "decode_instances": 1}),
    ([snap("prefill", "p"), snap("prefill", "q", drained=True), snap("decode", "d"), snap("decode", "e")],
     {"status": "ok", "healthy_prefill": 1, "healthy_decode": 2, "prefill_instances": 2, "decode_instances": 2}),
])
def test_health_decision_ok(snaps, want):
    assert h.health_decision(snaps) == (200, want)
    assert h.public_health(snaps) == (200, {"status": "ok"})


def test_health_decision_names_every_backend_of_a_missing_role():
    b = h.BackendHealth("prefill", "u", 1, threshold=3, now=0.0)
    b.observe(False, "refused", 1.0)
    snaps = [snap("prefill", "n", "unknown"), b.snapshot(True), snap("prefill", "x", drained=True),
             snap("prefill", "o", "down", in_rotation=False, failures=1), snap("prefill", "r", in_rotation=False),
             snap("decode", "d", "down", in_rotation=True, failures=1)]
    assert h.health_decision(snaps) == (503, {
        "status": "unavailable", "missing": ["prefill", "decode"],
        "message": "no healthy prefill backend in rotation (n:1 not probed yet, u:1 not answered /health yet (1 "
                   "failed: refused), x:1 drained for maintenance (POST /a3/undrain puts it back), o:1 out of "
                   "rotation: 1 consecutive failed /health probes (last: HTTP 500), r:1 healthy but not in the "
                   "upstream rotation (removed through /instances/remove?)); no healthy decode backend in rotation "
                   "(d:1 out of rotation: 1 consecutive failed /health probes (last: HTTP 500))",
        "healthy_prefill": 0, "healthy_decode": 0, "prefill_instances": 3, "decode_instances": 1})
    assert h.public_health(snaps) == (503, {
        "status": "unavailable", "missing": ["prefill", "decode"],
        "message": "no healthy prefill and no healthy decode backend in rotation; retry later"})


def test_health_decision_without_backends_of_a_role():
    assert h.health_decision([snap("prefill", "p")]) == (503, {
        "status": "unavailable", "missing": ["decode"], "message": "no decode backend is configured",
        "healthy_prefill": 1, "healthy_decode": 0, "prefill_instances": 1, "decode_instances": 0})
    assert h.health_decision([]) == (503, {
        "status": "unavailable", "missing": ["prefill", "decode"],
        "message": "no prefill backend is configured; no decode backend is configured",
        "healthy_prefill": 0, "healthy_decode": 0, "prefill_instances": 0, "decode_instances": 0})


def test_a_drained_backend_that_went_down_says_drained():
    snaps = [snap("prefill", "p"), snap("decode", "d", "down", in_rotation=False, drained=True, failures=1)]
    assert h.health_decision(snaps)[1]["message"] == ("no healthy decode backend in rotation (d:1 drained for "
                                                      "maintenance (POST /a3/undrain puts it back))")


def test_usable_without_a_drained_field():
    assert h.usable({"healthy": True, "in_rotation": True}) is True
    assert not h.usable({"healthy": True, "in_rotation": False})
    assert not h.usable({"healthy": False, "in_rotation": True})


def test_public_unavailable():
    assert h.public_unavailable(["decode"]) == "no healthy decode backend in rotation; retry later"


@pytest.mark.parametrize("roles, want", [(["prefill"], False), ([None], False), ([None, None, "prefill", "decode"],
                                                                                 False), (["decode", "prefill"], True)])
def test_retried_mid_stream(roles, want):
    assert h.retried_mid_stream(roles) is want


def test_culprit_prefers_the_last_that_never_answered():
    assert h.culprit([{"backend": "a", "status": None}, {"backend": "b", "status": 200}]) == "a"
    assert h.culprit([{"backend": "a", "status": 500}, {"backend": "b", "status": 200}]) == "b"


def test_why_not_of_a_backend_that_counts():
    """The reason given for a backend that is healthy, in rotation and not drained (never part of a 503)."""
    assert h._why_not(snap("decode", "d")) == "ok"  # pylint: disable=protected-access
