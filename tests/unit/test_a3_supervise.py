# -*- coding: utf-8 -*-
"""The node-side helper of the systemd units (roles/supervise/files/a3_supervise.py): back-off, exit
reasons, crash-loop messages, the canary's decisions, the exit record, and the planned-stop marker."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[2] / "roles" / "supervise" / "files" / "a3_supervise.py"
if os.environ.get("A3_MUTATION_ROOT"):
    # tests/mutation.py: the helper as mutmut lays it out (its mutants are named after this import)
    sys.path.insert(0, os.environ["A3_MUTATION_ROOT"])
    import a3_supervise as sup  # noqa: E402
else:
    _spec = importlib.util.spec_from_file_location("a3_supervise", HELPER)
    sup = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sup)

SIGS = [
    {"pattern": "Address already in use", "advice": "a port is taken"},
    {"pattern": r"Traceback \(most recent call last\)", "advice": "the engine crashed"},
]


def crash(t, reason="x"):
    return {"t": t, "event": "exit", "planned": False, "reason": reason}


def planned(t):
    return {"t": t, "event": "exit", "planned": True, "reason": "planned stop"}


def peer(t):
    return {"t": t, "event": "exit", "planned": False, "peer": True, "reason": "DP group member rank 0 disconnected"}


@pytest.mark.parametrize("events, expected", [
    ([], 0.0),                                             # first start
    ([planned(990)], 0.0),                                 # after a planned stop: never wait
    ([crash(990)], 0.0),                                   # first crash: RestartSec only
    ([crash(980), crash(990)], 2.0),                       # second: base
    ([crash(970), crash(980), crash(990)], 4.0),           # then doubling
    ([crash(t) for t in range(900, 1000, 10)], 60.0),      # capped
    ([crash(100), crash(990)], 0.0),                       # an old crash is out of the window
    ([crash(980), crash(985), planned(990)], 0.0),         # the last stop was planned
    ([crash(980), crash(985), peer(990)], 0.0),            # the last exit was a peer's doing
    ([crash(970), peer(975), crash(980), crash(990)], 2.0),  # crashes before a peer's exit are not counted
])
def test_backoff_delay(events, expected):
    assert sup.backoff_delay(events, now=1000, base=2, maximum=60, window_s=600) == expected


def test_exit_reason_names_the_newest_specific_signature():
    log = "INFO ok\nERROR zmq.error.ZMQError: Address already in use (addr='tcp://1.2.3.4:30000')\nTraceback (most recent call last)\n"
    reason = sup.exit_reason("success", "exited", "0", log, SIGS)
    assert reason.startswith("exited with status 0: ERROR zmq.error.ZMQError: Address already in use")
    assert "a port is taken" in reason


def test_exit_reason_without_signature_says_how_it_ended():
    assert sup.exit_reason("signal", "killed", "KILL", "all fine\n", SIGS) == \
        "killed KILL (signal); no fatal line in the log"


def test_crash_loop_message_says_systemd_gives_up_and_how_to_recover():
    msg = sup.crash_loop_message("ascend-vllm.service", 6, 5, 10, "exited with status 0: boom")
    assert "crash loop: 6 unplanned exits within 10 min, over the limit of 5 restarts" in msg
    assert "systemd stops restarting it at its start limit" in msg and "boom" in msg
    assert "systemctl reset-failed ascend-vllm.service" in msg
    assert "crash loop" not in sup.crash_loop_message("u", 2, 5, 10, "r")


A, B, P = "http://127.0.0.1:6700", "http://127.0.0.1:6701", "http://127.0.0.2:6700"


def test_canary_restarts_a_hung_rank_after_the_threshold_only():
    state = {}
    state, restart = sup.canary_step(state, {A: "hung", B: "ok"}, {P: True}, hang_failures=2, peer_failures=3)
    assert restart is None and state["hang"] == {A: 1, B: 0}
    state, restart = sup.canary_step(state, {A: "hung", B: "ok"}, {P: True}, 2, 3)
    assert restart.reason.startswith("hung: %s answers /health but produced no token in 2 canary" % A)
    assert restart.peer is False                  # a hang of this node's rank is its own crash
    assert state == {"hang": {}, "peer": {}}      # counters start over after a restart


def test_canary_counts_only_consecutive_silences():
    state = {}
    for verdict in ("hung", "ok", "hung", "down", "hung"):
        state, restart = sup.canary_step(state, {A: verdict}, {}, 2, 3)
        assert restart is None


def test_canary_restarts_when_a_peer_is_down_while_we_serve():
    state = {}
    for _unused in range(2):
        state, restart = sup.canary_step(state, {A: "ok"}, {P: False}, 3, 3)
        assert restart is None
    state, restart = sup.canary_step(state, {A: "ok"}, {P: False}, 3, 3)
    assert restart.reason.startswith("DP group incomplete: %s has failed /health for 3 checks" % P)
    assert restart.peer is True                   # another node's rank: no crash of this unit


def test_canary_ignores_down_peers_while_our_ranks_are_down_too():
    # during a group restart nobody serves: that is the supervisor's business, not a reason to restart again
    state = {}
    for _unused in range(5):
        state, restart = sup.canary_step(state, {A: "down"}, {P: False}, 3, 3)
        assert restart is None and state["peer"][P] == 0


def _canary_round(tmp_path, monkeypatch, answers, extra=None, sent=None):
    """One canary round through main(): the unit is active, answers maps a URL to its (status, body); returns the
    systemctl calls and the record. extra: more canary settings; sent: a list that gets (url, headers) of each
    request."""
    record = str(tmp_path / "u.service.jsonl")
    config = tmp_path / "canary.json"
    config.write_text(json.dumps(dict({"unit": "u.service", "record": record, "local": [A], "peers": [P],
                                       "model": "m", "timeout": 1, "hang_failures": 1, "peer_failures": 1},
                                      **(extra or {}))))
    calls = []

    def answer(url, timeout, body=None, headers=None):
        if sent is not None:
            sent.append((url, headers or {}))
        return answers[url]
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: {"ActiveState": "active"})
    monkeypatch.setattr(sup, "http_status", answer)
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append(argv))
    assert sup.main(["canary", "--config", str(config)]) == 0
    return calls, sup.read_record(record)


def test_the_canary_restart_for_a_down_peer_is_recorded_as_a_peer_event(tmp_path, monkeypatch):
    calls, events = _canary_round(tmp_path, monkeypatch, {
        A + "/health": (200, None), A + "/v1/completions": (200, {"choices": [{"text": "x"}]}),
        P + "/health": (0, None)})
    assert events[-1]["peer"] is True and events[-1]["reason"].startswith("DP group incomplete: " + P)
    assert calls == [["systemctl", "reset-failed", "u.service"], ["systemctl", "restart", "--no-block", "u.service"]]


def test_the_canary_restart_for_a_hung_rank_counts_as_a_crash(tmp_path, monkeypatch):
    calls, events = _canary_round(tmp_path, monkeypatch, {
        A + "/health": (200, None), A + "/v1/completions": (0, None), P + "/health": (200, None)})
    assert "peer" not in events[-1] and events[-1]["reason"].startswith("hung: " + A)
    assert calls == [["systemctl", "restart", "--no-block", "u.service"]]      # no reset of the start limit


@pytest.mark.parametrize("status, body, verdict", [
    (200, {"choices": [{"text": "x"}]}, "ok"),
    (200, {"choices": []}, "hung"),          # an answer without a token
    (200, None, "hung"),
    (0, None, "hung"),                       # silence
    (401, {"error": "Unauthorized"}, "unauthorized"),   # vLLM's answer to a missing or wrong key
    (403, None, "unauthorized"),
    (400, None, "ok"),                       # any other error answer: alive
    (404, None, "ok"),
    (500, None, "ok"),
])
def test_canary_verdict_tells_a_refused_key_from_life_and_from_silence(status, body, verdict):
    assert sup.canary_verdict(status, body) == verdict


def test_a_refused_key_never_restarts_and_neither_proves_nor_disproves_a_hang():
    state = {}
    for _unused in range(5):
        state, restart = sup.canary_step(state, {A: "unauthorized"}, {P: True}, hang_failures=1, peer_failures=3)
        assert restart is None and state["hang"] == {}
    # a silent round, then a refused one: the silent count is kept, not started over
    state, restart = sup.canary_step(state, {A: "hung"}, {P: True}, 2, 3)
    assert restart is None and state["hang"] == {A: 1}
    state, restart = sup.canary_step(state, {A: "unauthorized"}, {P: True}, 2, 3)
    assert restart is None and state["hang"] == {A: 1}
    state, restart = sup.canary_step(state, {A: "hung"}, {P: True}, 2, 3)
    assert restart is not None and restart.reason.startswith("hung: " + A)


def test_a_down_peer_still_restarts_while_our_ranks_refuse_the_key():
    # the ranks answer /health and their API answers (401): they are up, so a peer down for 3 checks is a broken group
    state = {}
    for _unused in range(2):
        state, restart = sup.canary_step(state, {A: "unauthorized", B: "ok"}, {P: False}, 3, 3)
        assert restart is None
    state, restart = sup.canary_step(state, {A: "unauthorized", B: "ok"}, {P: False}, 3, 3)
    assert restart is not None and restart.peer is True


def test_unauthorized_changes_are_reported_once_per_change():
    state = {}
    assert sup.unauthorized_step(state, {A: "unauthorized", B: "ok"}, {A: 401, B: 200}) == [(A, 401)]
    assert state["unauthorized"] == {A: 401}
    assert sup.unauthorized_step(state, {A: "unauthorized", B: "ok"}, {A: 401, B: 200}) == []      # no news
    assert sup.unauthorized_step(state, {A: "down", B: "ok"}, {B: 200}) == []                      # not asked: kept
    assert state["unauthorized"] == {A: 401}
    assert sup.unauthorized_step(state, {A: "unauthorized", B: "ok"}, {A: 403, B: 200}) == [(A, 403)]
    assert sup.unauthorized_step(state, {A: "hung", B: "ok"}, {A: 0, B: 200}) == [(A, None)]       # key accepted
    assert "unauthorized" not in state
    assert sup.unauthorized_step(state, {A: "ok"}, {A: 200}) == []


def test_the_counters_start_over_after_a_restart_but_a_refused_key_stays_known():
    state = {"unauthorized": {B: 401}}
    state, restart = sup.canary_step(state, {A: "hung", B: "unauthorized"}, {}, 1, 3)
    assert restart is not None and state == {"hang": {}, "peer": {}, "unauthorized": {B: 401}}


def test_the_key_file_is_read_stripped_and_a_missing_one_says_why(tmp_path):
    key = tmp_path / "vllm_api_key"
    key.write_text("s3cret\n")
    assert sup.read_api_key(str(key)) == ("s3cret", "")
    assert sup.read_api_key("") == ("", "no key (its settings name no api_key_file: vllm_api_key is not set)")
    key.write_text("\n")
    assert sup.read_api_key(str(key)) == ("", "no key (%s is empty)" % key)
    key.unlink()
    assert sup.read_api_key(str(key))[1].startswith("no key (cannot read %s: " % key)


def test_the_canary_carries_the_key_from_its_file_and_reports_a_refusal_once(tmp_path, monkeypatch, capsys):
    key = tmp_path / "vllm_api_key"
    key.write_text("s3cret-key\n")
    sent = []
    answers = {A + "/health": (200, None), A + "/v1/completions": (401, {"error": "Unauthorized"}),
               P + "/health": (200, None)}
    for _unused in range(3):      # hang_failures 1: a silence would restart at once
        calls, events = _canary_round(tmp_path, monkeypatch, answers, {"api_key_file": str(key)}, sent)
        assert calls == [] and events == []       # no restart, nothing recorded as an exit
    assert [h for u, h in sent if u.endswith("/v1/completions")] == [{"Authorization": "Bearer s3cret-key"}] * 3
    assert all(h == {} for u, h in sent if u.endswith("/health"))       # /health needs no key
    out = capsys.readouterr().out
    assert out.count("refused the canary request with HTTP 401") == 1, out      # once per change
    assert "the canary sends the key in %s" % key in out and "s3cret-key" not in out
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: {"ActiveState": "active", "Result": "success"})
    sup.main(["status", "--state-dir", str(tmp_path), "--unit", "u.service"])
    status = json.loads(capsys.readouterr().out)
    assert status[0]["canary_unauthorized"] == [A + " (HTTP 401)"]
    # the key accepted again: said once, and status shows nothing
    answers[A + "/v1/completions"] = (200, {"choices": [{"text": "x"}]})
    _canary_round(tmp_path, monkeypatch, answers, {"api_key_file": str(key)})
    assert "accepts the canary's key again" in capsys.readouterr().out
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: {"ActiveState": "active"})
    sup.main(["status", "--state-dir", str(tmp_path), "--unit", "u.service"])
    assert json.loads(capsys.readouterr().out)[0]["canary_unauthorized"] == []


def test_without_a_key_file_the_canary_sends_no_key_and_says_so(tmp_path, monkeypatch, capsys):
    sent = []
    calls, _unused = _canary_round(tmp_path, monkeypatch, {
        A + "/health": (200, None), A + "/v1/completions": (401, None), P + "/health": (200, None)}, sent=sent)
    assert calls == [] and all(h == {} for _u, h in sent)
    assert "the canary sends no key (its settings name no api_key_file" in capsys.readouterr().out


def test_record_and_planned_marker_round_trip(tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "u.service.jsonl")
    log = tmp_path / "vllm_log.log"
    log.write_text("old run: Address already in use\n")
    sigfile = tmp_path / "sigs.json"
    sigfile.write_text(json.dumps(SIGS))
    # the start remembers where this run's log begins
    assert sup.main(["backoff", "--record", record, "--log", str(log)]) == 0
    with log.open("a") as fh:
        fh.write("Traceback (most recent call last)\n")
    monkeypatch.setenv("SERVICE_RESULT", "success")
    monkeypatch.setenv("EXIT_CODE", "exited")
    monkeypatch.setenv("EXIT_STATUS", "0")
    # the process ended on its own: ExecStop runs with an empty $MAINPID, the exit is a crash
    sup.main(["stop-mark", "--record", record, "--mainpid="])
    sup.main(["record", "--unit", "u.service", "--record", record, "--log", str(log), "--signatures", str(sigfile),
              "--restarts", "1", "--window-min", "10"])
    events = sup.read_record(record)
    assert len(events) == 1 and events[0]["planned"] is False
    assert "the engine crashed" in events[0]["reason"] and "Address already" not in events[0]["reason"]
    assert "unplanned exit 1 of 1" in capsys.readouterr().out
    # a stop asked for while it ran: planned, and not counted
    sup.main(["stop-mark", "--record", record, "--mainpid=1234"])
    sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "1", "--window-min", "10"])
    events = sup.read_record(record)
    assert events[-1]["planned"] is True and events[-1]["reset"] is True and not os.path.exists(record + ".planned")
    # the planned restart started the count afresh (as it reset systemd's start limit): the next crash is the 1st
    sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "1", "--window-min", "10"])
    assert "unplanned exit 1 of 1" in capsys.readouterr().out
    # a second crash goes over the limit of 1: the message says systemd gives up
    sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "1", "--window-min", "10"])
    assert "crash loop: 2 unplanned exits" in capsys.readouterr().out


def test_an_exit_a_peer_caused_is_forgiven_and_not_counted(tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "u.service.jsonl")
    log = tmp_path / "vllm_log.log"
    log.write_text("")
    sigfile = tmp_path / "sigs.json"
    sigfile.write_text(json.dumps([{"pattern": "DP group member rank [0-9]+ disconnected", "peer": True,
                                    "advice": "a rank of this DP group died"}] + SIGS))
    calls, slept = [], []
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append(argv))
    monkeypatch.setattr(sup.time, "sleep", slept.append)       # the back-off of 3 crashes: 4 s, not waited here
    monkeypatch.setenv("SERVICE_RESULT", "success")
    monkeypatch.setenv("EXIT_CODE", "exited")
    monkeypatch.setenv("EXIT_STATUS", "0")
    for _unused in range(3):
        sup.append_record(record, crash(__import__("time").time() - 30))
    assert sup.main(["backoff", "--record", record, "--log", str(log)]) == 0
    assert slept == [4.0]
    log.write_text("ERROR [core.py:1044] DP group member rank 1 disconnected; the DP group is broken\n")
    sup.main(["record", "--unit", "u.service", "--record", record, "--log", str(log), "--signatures", str(sigfile),
              "--restarts", "5", "--window-min", "10"])
    events = sup.read_record(record)
    assert events[-1]["peer"] is True and events[-1]["planned"] is False
    assert calls == [["systemctl", "reset-failed", "u.service"]]        # systemd's start limit starts afresh
    assert "not counted towards the crash loop" in capsys.readouterr().out
    now = __import__("time").time()
    assert sup.crashes_within(events, now, 600) == []                   # ... and so does the helper's count
    assert sup.backoff_delay(events, now, 2, 60, 600) == 0.0
    # the same exit without the peer mark counts: the 4th crash of the window
    sup.append_record(record, crash(now))
    log.write_text("Traceback (most recent call last)\n")
    sup.main(["record", "--unit", "u.service", "--record", record, "--log", str(log), "--signatures", str(sigfile),
              "--restarts", "5", "--window-min", "10"])
    assert "unplanned exit 2 of 5" in capsys.readouterr().out and len(calls) == 1


def _crashes(record, n, now):
    for i in range(n):
        sup.append_record(record, crash(now - 60 + i))


def test_a_deliberate_start_waits_no_back_off_once(tmp_path, capsys, monkeypatch):
    record = str(tmp_path / "r.jsonl")
    _crashes(record, 7, time.time())  # a crash loop: the back-off would be 60 s
    slept = []
    monkeypatch.setattr(sup.time, "sleep", slept.append)
    sup.main(["deliberate", "--record", record])
    assert sup.main(["backoff", "--record", record]) == 0
    assert slept == [] and "no back-off (it would have been 60s)" in capsys.readouterr().out
    assert not os.path.exists(record + ".deliberate")  # only that start
    sup.main(["backoff", "--record", record])  # systemd's next automatic restart backs off again
    assert slept == [60.0]


def test_a_stop_during_the_back_off_is_no_crash(tmp_path, capsys, monkeypatch):
    """systemctl stop/restart while ExecStartPre sleeps: systemd kills the sleep (no ExecStop, so no stop mark);
    the process never ran, so record must not count a crash (before, each such stop was one more toward the
    crash-loop limit and made the next start back off longer)."""
    record = str(tmp_path / "r.jsonl")
    _crashes(record, 3, time.time())

    stops = []

    def killed(delay):  # the stop arrives while it sleeps: ExecStopPost runs before the sleep returns
        if stops:       # (record's own systemctl call sleeps too, with this module's time patched)
            return
        stops.append(delay)
        monkeypatch.setenv("SERVICE_RESULT", "signal")
        monkeypatch.setenv("EXIT_CODE", "killed")
        monkeypatch.setenv("EXIT_STATUS", "15")
        sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "5", "--window-min", "10"])
    monkeypatch.setattr(sup.time, "sleep", killed)
    sup.main(["backoff", "--record", record, "--base", "2", "--max", "60"])
    events = sup.read_record(record)
    assert events[-1]["planned"] is True and "never ran" in events[-1]["reason"], events[-1]
    # the stop was asked for: it reset systemd's start limit, and the crash count starts afresh with it
    assert events[-1]["reset"] is True and sup.crashes_within(events, time.time(), 600) == []
    assert sup.backoff_delay(events, time.time(), 2, 60, 600) == 0.0  # the restart starts at once
    # a start that timed out in its back-off is a failed start, and counts
    with open(record + ".backoff", "w") as fh:
        fh.write("1")
    monkeypatch.setenv("SERVICE_RESULT", "timeout")
    sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "5", "--window-min", "10"])
    assert sup.read_record(record)[-1]["planned"] is False
    # without a back-off in progress, a killed start is a crash as before
    monkeypatch.setenv("SERVICE_RESULT", "signal")
    sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "5", "--window-min", "10"])
    assert sup.read_record(record)[-1]["planned"] is False


def test_record_file_is_bounded(tmp_path):
    record = str(tmp_path / "r.jsonl")
    with open(record, "w") as fh:       # a record past its bound (written before the bound was lowered, say)
        fh.writelines(json.dumps(crash(i)) + "\n" for i in range(sup.RECORD_KEEP + 15))
    for i in range(sup.RECORD_KEEP + 15, sup.RECORD_KEEP + 20):
        sup.append_record(record, crash(i))
    events = sup.read_record(record)
    assert len(events) == sup.RECORD_KEEP and events[-1]["t"] == sup.RECORD_KEEP + 19


def test_wait_fails_with_what_it_waited_for(capsys):
    rc = sup.main(["wait", "--tcp", "127.0.0.1:1", "--what", "etcd", "--timeout", "0.2", "--interval", "0.1"])
    assert rc == 1
    assert "127.0.0.1:1 (etcd) accepting connections" in capsys.readouterr().err


def test_wait_for_an_etcd_cluster_needs_one_member_listening(capsys):
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: connecting is refused
    members = "127.0.0.1:%d,127.0.0.1:%d" % (closed.getsockname()[1], port)
    try:
        assert sup.main(["wait", "--tcp", members, "--what", "etcd", "--timeout", "1", "--interval", "0.1"]) == 0
        srv.close()
        assert sup.main(["wait", "--tcp", members, "--what", "etcd", "--timeout", "0.2", "--interval", "0.1"]) == 1
    finally:
        srv.close()
        closed.close()
    assert "one of %s (etcd) accepting connections" % members.replace(",", ", ") in capsys.readouterr().err


def test_wait_for_a_readiness_mark_fails_naming_it_then_passes_once_it_exists(tmp_path, capsys):
    mark = tmp_path / ".yr_worker_ready"
    argv = ["wait", "--file", str(mark), "--file-what", "worker ready", "--timeout", "0.2", "--interval", "0.1"]
    assert sup.main(argv) == 1
    assert "%s (worker ready) present" % mark in capsys.readouterr().err
    mark.write_text("126\n")
    assert sup.main(argv) == 0


def test_wait_after_the_start_ends_at_once_when_the_main_process_ended(tmp_path, capsys):
    import subprocess
    import time
    child = subprocess.Popen(["true"])
    child.wait()
    start = time.monotonic()
    rc = sup.main(["wait", "--file", str(tmp_path / "never"), "--pid", str(child.pid), "--timeout", "30",
                   "--interval", "0.1"])
    assert rc == 1 and time.monotonic() - start < 5
    assert "main process %d ended before it was ready" % child.pid in capsys.readouterr().err
    assert sup.main(["wait", "--pid", str(__import__("os").getpid()), "--timeout", "1"]) == 0


def test_soft_wait_goes_on_and_notes_it_in_the_log(tmp_path):
    log = tmp_path / "vllm_log.log"
    start = __import__("time").monotonic()
    rc = sup.main(["wait", "--soft-tcp", "127.0.0.1:1", "--soft-what", "DP master RPC", "--soft-timeout", "0.3",
                   "--interval", "0.1", "--log", str(log)])
    assert rc == 0 and __import__("time").monotonic() - start < 5
    text = log.read_text()
    assert "waiting up to 0.3s for 127.0.0.1:1 (DP master RPC)" in text
    assert "starting anyway: 127.0.0.1:1 (DP master RPC) not listening after 0.3s" in text


# --- silence that looks like an answer, and the crash loop the supervisor gives up on (issue 37) ---

@pytest.mark.parametrize("body", [
    None,                                                                   # an empty or unparsable body
    {},
    [],
    "a token",
    {"choices": None},
    {"choices": []},
    {"choices": "x"},
    {"choices": [{}]},
    {"choices": [{"text": ""}]},                                            # an empty text and no count
    {"choices": [{"text": None}]},
    {"choices": [{"text": ""}], "usage": {"completion_tokens": None}},
    {"choices": [{"text": ""}], "usage": {"completion_tokens": 0}},
    {"choices": [{"text": "x"}], "usage": {"completion_tokens": 0}},        # the count says no token was made
    {"usage": {"completion_tokens": 1}},                                    # counted, but no choice came back
    {"choices": [], "usage": {"completion_tokens": 1}},
    {"choices": "x", "usage": {"completion_tokens": 1}},
    {"choices": [{"text": ""}], "usage": {"completion_tokens": "1"}},      # no count: the empty text decides
])
def test_a_200_without_a_token_is_silence(body):
    assert sup.canary_verdict(200, body) == "hung"
    assert sup.produced_a_token(body) is False


@pytest.mark.parametrize("body", [
    {"choices": [{"text": "x"}]},
    {"choices": [{"text": ""}, {"text": "x"}]},
    {"choices": [{"text": "x"}], "usage": {}},
    {"choices": [{"text": "x"}], "usage": {"completion_tokens": 1}},
    # one token that decodes to no text (an end of sequence, part of a character): the engine did run
    {"choices": [{"text": "", "finish_reason": "stop"}], "usage": {"prompt_tokens": 2, "completion_tokens": 1}},
])
def test_a_200_with_a_token_is_life(body):
    assert sup.canary_verdict(200, body) == "ok"
    assert sup.produced_a_token(body) is True


@pytest.mark.parametrize("body", [
    {"choices": [{"text": ""}], "usage": {"completion_tokens": 0}},
    {"choices": []},
    {},
])
def test_a_round_whose_answer_has_no_token_restarts_a_hung_rank(tmp_path, monkeypatch, body):
    calls, events = _canary_round(tmp_path, monkeypatch, {
        A + "/health": (200, None), A + "/v1/completions": (200, body), P + "/health": (200, None)})
    assert calls == [["systemctl", "restart", "--no-block", "u.service"]]
    assert events[-1]["reason"].startswith("hung: %s answers /health but produced no token in 1 canary" % A)


class _EmptyAnswers:
    """A loopback engine whose /health answers 200 and whose completions answer 200 with the body given."""

    def __init__(self, body: bytes):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                data = b"" if self.path == "/health" else body
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args):
                pass
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True).start()
        self.base = "http://127.0.0.1:%d" % self.srv.server_address[1]


@pytest.mark.parametrize("raw", [b"", b"{}", b'{"choices": [{"text": ""}], "usage": {"completion_tokens": 0}}',
                                 b"not json"])
def test_the_canary_over_http_counts_an_empty_200_as_silence(tmp_path, monkeypatch, raw):
    engine = _EmptyAnswers(raw)
    try:
        record = str(tmp_path / "u.service.jsonl")
        config = tmp_path / "canary.json"
        config.write_text(json.dumps({"unit": "u.service", "record": record, "local": [engine.base], "peers": [],
                                      "model": "m", "timeout": 5, "hang_failures": 2, "peer_failures": 3}))
        calls = []
        monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: {"ActiveState": "active"})
        monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append(argv))
        assert sup.main(["canary", "--config", str(config)]) == 0
        assert calls == [] and json.loads(open(record + ".canary").read())["hang"] == {engine.base: 1}
        assert sup.main(["canary", "--config", str(config)]) == 0
        assert calls == [["systemctl", "restart", "--no-block", "u.service"]]
        assert sup.read_record(record)[-1]["reason"].startswith("hung: " + engine.base)
    finally:
        engine.srv.shutdown()


@pytest.mark.parametrize("crashes, gives_up", [(1, False), (4, False), (5, False), (6, True), (9, True)])
def test_the_crash_loop_message_says_systemd_gives_up_only_past_the_limit(crashes, gives_up):
    msg = sup.crash_loop_message("u.service", crashes, 5, 10, "boom")
    if gives_up:
        assert msg.startswith("u.service: crash loop: %d unplanned exits within 10 min, over the limit of 5 restarts"
                              % crashes)
        assert "GAVE UP in playbooks/status.yml" in msg and "Last: boom." in msg
    else:
        assert msg == "u.service: unplanned exit %d of 5 allowed within 10 min: boom" % crashes


def test_record_says_crash_loop_at_the_crash_past_the_limit_and_not_before(tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "u.service.jsonl")
    monkeypatch.setenv("SERVICE_RESULT", "exit-code")
    monkeypatch.setenv("EXIT_CODE", "exited")
    monkeypatch.setenv("EXIT_STATUS", "1")
    lines = []
    for _unused in range(4):
        sup.main(["record", "--unit", "u.service", "--record", record, "--restarts", "3", "--window-min", "10"])
        lines.append(capsys.readouterr().out)
    assert [("crash loop" in line) for line in lines] == [False, False, False, True]
    assert lines[2].startswith("u.service: unplanned exit 3 of 3 allowed within 10 min: exited with status 1")
    assert lines[3].startswith("u.service: crash loop: 4 unplanned exits within 10 min, over the limit of 3")


def _status(tmp_path, monkeypatch, capsys, show):
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: show)
    assert sup.main(["status", "--state-dir", str(tmp_path), "--unit", "u.service", "--window-min", "10"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_says_gave_up_only_when_systemd_hit_the_start_limit(tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "u.service.jsonl")
    now = time.time()
    for t in (now - 7200, now - 50, now - 40):
        sup.append_record(record, crash(t, "exited with status 1: boom %d" % t))
    sup.append_record(record, planned(now - 30))
    gave_up = _status(tmp_path, monkeypatch, capsys, {"ActiveState": "failed", "SubState": "failed",
                                                      "Result": "start-limit-hit", "UnitFileState": "enabled"})
    assert gave_up == [{"unit": "u.service", "active": "failed", "sub": "failed", "enabled": "enabled",
                        "gave_up": True, "restarts": 3, "restarts_in_window": 2,
                        "last_reason": "exited with status 1: boom %d" % (now - 40),
                        "last_time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 40)),
                        "canary_unauthorized": [], "held_by": ""}]
    for show in ({"ActiveState": "failed", "Result": "exit-code"},       # failed, but systemd did not give up
                 {"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code"},
                 {"ActiveState": "active", "Result": "success"},
                 {}):                                                   # systemctl said nothing
        status = _status(tmp_path, monkeypatch, capsys, show)
        assert status[0]["gave_up"] is False, show
        assert status[0]["restarts"] == 3 and status[0]["restarts_in_window"] == 2


def test_status_of_a_unit_without_a_record(tmp_path, monkeypatch, capsys):
    assert _status(tmp_path, monkeypatch, capsys, {}) == [{
        "unit": "u.service", "active": "unknown", "sub": "", "enabled": "", "gave_up": False, "restarts": 0,
        "restarts_in_window": 0, "last_reason": "", "last_time": "", "canary_unauthorized": [], "held_by": ""}]
