# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The prober's view of each backend (BackendHealth, the rotation state machine) and the /healthcheck
decisions: the full one of the admin listener (names every backend and why it does not count) and the public
one (which role is missing, no address)."""

import time

from . import ROLES


def backend_key(host, port):
    return "%s:%s" % (host, port)


def iso_time(ts):
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int((ts % 1) * 1000)


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
                "drained": bool(drained), "outstanding_load": round(float(outstanding_load), 3) + 0.0,
                "inflight_requests": int(inflight_requests),
                "healthy": self.state == "up", "last_probe_ok": self.last_probe_ok,
                "last_probe_time": iso_time(self.last_probe_time), "last_probe_detail": self.last_probe_detail,
                "consecutive_failures": self.failures, "last_change_time": iso_time(self.last_change_time),
                "last_change_reason": self.last_change_reason, "request_failures": self.request_failures,
                "last_request_failure": self.last_request_failure,
                "last_request_failure_time": iso_time(self.last_request_failure_time)}


def usable(snap):
    return snap["healthy"] and snap["in_rotation"] and not snap.get("drained", False)


def health_decision(snapshots):
    """(HTTP status, JSON body) of the admin listener's /healthcheck, from the backend snapshots
    (BackendHealth.snapshot): the message names each backend of a missing role and why it does not count."""
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


def public_health(snapshots):
    """(HTTP status, JSON body) of the public listener's /healthcheck: {"status": "ok"}, or 503 saying which
    role has no healthy backend in rotation, without any backend's address."""
    status, full = health_decision(snapshots)
    if status == 200:
        return 200, {"status": "ok"}
    return 503, {"status": "unavailable", "missing": full["missing"], "message": public_unavailable(full["missing"])}


def public_unavailable(missing):
    """What a client reads when no healthy backend of the missing roles is in rotation."""
    return "no healthy %s backend in rotation; retry later" % " and no healthy ".join(missing)


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
