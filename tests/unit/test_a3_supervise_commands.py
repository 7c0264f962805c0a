# -*- coding: utf-8 -*-
"""The supervisor helper's commands run in this process with a fake clock (roles/supervise/files/a3_supervise.py):
wait, backoff, deliberate, stop-mark, record, canary and status, pinned by their exit codes, the lines they print,
the files they leave and the systemctl calls they make; and the command line's options and defaults."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time as real_time
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

A, B, P, Q = "http://127.0.0.1:6700", "http://127.0.0.1:6701", "http://127.0.0.2:6700", "http://127.0.0.2:6701"


class Clock:
    """Stands in for the helper's time module: monotonic and wall time advance only by sleep."""

    def __init__(self, now=1000.0, on_sleep=None):
        self.now, self.slept, self.on_sleep = now, [], on_sleep

    def monotonic(self):
        return self.now

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        if self.on_sleep:
            self.on_sleep(seconds)
        self.now += seconds

    @staticmethod
    def strftime(fmt, t=None):
        return real_time.strftime(fmt, t) if t is not None else "2026-01-02 03:04:05"

    localtime = staticmethod(real_time.gmtime)


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(sup, "time", fake)
    return fake


# ---------------------------------------------------------------------------------------------------- wait

def test_wait_returns_at_once_when_all_is_ready(clock, monkeypatch, capsys, tmp_path):
    mark = tmp_path / "ready"
    mark.write_text("")
    seen = []
    monkeypatch.setattr(sup, "container_running", lambda name: seen.append(name) or True)
    monkeypatch.setattr(sup, "tcp_open", lambda hp: seen.append(hp) or True)
    monkeypatch.setattr(sup, "pid_alive", lambda pid: seen.append(pid) or True)
    assert sup.main(["wait", "--container", "vllm", "--tcp", "h:1", "--file", str(mark), "--pid", "42",
                     "--soft-tcp", "h:2"]) == 0
    assert seen == ["42", "vllm", "h:1", "h:2"] and clock.slept == []
    assert capsys.readouterr() == ("", "")


def test_wait_checks_the_endpoints_only_once_the_container_runs(clock, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(sup, "container_running", lambda name: len(clock.slept) >= 2)
    monkeypatch.setattr(sup, "tcp_open", lambda hp: seen.append((hp, len(clock.slept))) or True)
    assert sup.main(["wait", "--container", "vllm", "--tcp", "h:1", "--interval", "0.5"]) == 0
    assert clock.slept == [0.5, 0.5] and seen == [("h:1", 2)]
    assert capsys.readouterr() == ("", "")


def test_wait_gives_up_at_its_deadline_naming_all_it_waited_for(clock, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sup, "tcp_open", lambda hp: hp == "h:3")
    argv = ["wait", "--tcp", "h:1", "--what", "etcd", "--tcp", "h:2", "--tcp", "h:3", "--file", str(tmp_path / "m"),
            "--file", str(tmp_path / "n"), "--file-what", "worker ready", "--timeout", "4", "--interval", "2"]
    assert sup.main(argv) == 1
    assert clock.slept == [2.0, 2.0]           # checks at 0, 2 and 4 s: the deadline itself is too late
    assert capsys.readouterr() == ("", "gave up after 4s waiting for: h:1 (etcd) accepting connections; h:2 () "
                                       "accepting connections; %s (worker ready) present; %s () present\n"
                                   % (tmp_path / "m", tmp_path / "n"))


def test_wait_for_a_list_needs_one_of_it_and_names_the_whole_list(clock, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(sup, "tcp_open", lambda hp: seen.append(hp) or False)
    argv = ["wait", "--tcp", "e1:2379,e2:2379,e3:2379", "--what", "etcd", "--tcp", "h:1", "--timeout", "2",
            "--interval", "2"]
    assert sup.main(argv) == 1
    assert seen == ["e1:2379,e2:2379,e3:2379", "h:1"] * 2     # one check of the list a round, as of one address
    assert capsys.readouterr().err == ("gave up after 2s waiting for: one of e1:2379, e2:2379, e3:2379 (etcd) "
                                       "accepting connections; h:1 () accepting connections\n")
    monkeypatch.setattr(sup, "tcp_open", lambda hp: hp == "e1:2379,e2:2379,e3:2379")
    assert sup.main(["wait", "--tcp", "e1:2379,e2:2379,e3:2379", "--what", "etcd"]) == 0


def test_wait_for_a_container_names_only_the_container(clock, monkeypatch, capsys):
    monkeypatch.setattr(sup, "container_running", lambda name: False)
    monkeypatch.setattr(sup, "tcp_open", lambda hp: False)
    assert sup.main(["wait", "--container", "vllm", "--tcp", "h:1", "--timeout", "0.5"]) == 1
    assert clock.slept == [2.0]                # the default interval
    assert capsys.readouterr().err == "gave up after 0.5s waiting for: container vllm running\n"


def test_wait_uses_its_default_timeout(clock, monkeypatch, capsys):
    monkeypatch.setattr(sup, "tcp_open", lambda hp: False)
    assert sup.main(["wait", "--tcp", "h:1", "--interval", "100"]) == 1
    assert clock.slept == [100.0, 100.0, 100.0]
    assert capsys.readouterr().err == "gave up after 300s waiting for: h:1 () accepting connections\n"


def test_wait_ends_when_the_main_process_ended(clock, monkeypatch, capsys):
    monkeypatch.setattr(sup, "pid_alive", lambda pid: len(clock.slept) < 1)
    monkeypatch.setattr(sup, "tcp_open", lambda hp: False)
    assert sup.main(["wait", "--pid", "77", "--tcp", "h:1", "--interval", "1"]) == 1
    assert clock.slept == [1.0]
    assert capsys.readouterr() == ("", "the unit's main process 77 ended before it was ready\n")


def test_soft_wait_notes_what_it_waits_for_and_goes_on_when_it_listens(clock, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sup, "tcp_open", lambda hp: hp == "h:1" or len(clock.slept) >= 2)
    log = tmp_path / "vllm.log"
    assert sup.main(["wait", "--soft-tcp", "h:1", "--soft-what", "up", "--soft-tcp", "h:2", "--soft-what", "rpc",
                     "--soft-tcp", "h:3", "--interval", "1", "--log", str(log)]) == 0
    assert clock.slept == [1.0, 1.0]
    assert capsys.readouterr().out == "waiting up to 60s for h:2 (rpc), h:3 ()\n"
    assert log.read_text() == "2026-01-02 03:04:05 a3_supervise: waiting up to 60s for h:2 (rpc), h:3 ()\n"


def test_soft_wait_starts_anyway_after_its_timeout(clock, monkeypatch, capsys):
    monkeypatch.setattr(sup, "tcp_open", lambda hp: hp == "h:2" and len(clock.slept) >= 1)
    assert sup.main(["wait", "--soft-tcp", "h:1", "--soft-tcp", "h:2", "--soft-what", "a", "--soft-what", "b",
                     "--soft-timeout", "4", "--interval", "2"]) == 0
    assert clock.slept == [2.0, 2.0]           # the soft deadline itself ends the wait
    assert capsys.readouterr().out == ("waiting up to 4s for h:1 (a), h:2 (b)\n"
                                       "starting anyway: h:1 (a) not listening after 4s\n")


# ------------------------------------------------------------------------------- backoff, deliberate, stop-mark

def _crash(t):
    return {"t": t, "event": "exit", "planned": False, "reason": "x"}


def test_backoff_sleeps_with_a_marker_and_saves_where_the_log_starts(clock, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    for t in (401, 990, 995):
        sup.append_record(record, _crash(t))
    log = tmp_path / "vllm.log"
    log.write_text("12345")
    markers = []
    clock.on_sleep = lambda s: markers.append(Path(record + ".backoff").read_text())
    assert sup.main(["backoff", "--record", record, "--log", str(log), "--base", "1.5", "--max", "100",
                     "--window-min", "10"]) == 0
    assert clock.slept == [3.0] and markers == ["1000.0"]
    assert not os.path.exists(record + ".backoff")
    assert Path(record + ".offset").read_text() == "5"
    assert capsys.readouterr().out == "back-off: waiting 3s before restarting (3 crashes within 10 min)\n"


def test_backoff_defaults(clock, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    for t in (400, 500, 600, 700, 800, 900, 990, 995):
        sup.append_record(record, _crash(t))
    sup.append_record(record, _crash(399))    # out of the default 10 min window
    assert sup.main(["backoff", "--record", record]) == 0
    assert clock.slept == [60.0]              # 2 x 2 ** 6 = 128, capped at 60
    assert capsys.readouterr().out == "back-off: waiting 60s before restarting (8 crashes within 10 min)\n"
    assert not os.path.exists(record + ".offset")


def test_backoff_without_crashes_does_not_wait_and_a_missing_log_starts_at_zero(clock, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    sup.append_record(record, _crash(995))
    assert sup.main(["backoff", "--record", record, "--log", str(tmp_path / "none.log")]) == 0
    assert clock.slept == [] and capsys.readouterr().out == ""
    assert Path(record + ".offset").read_text() == "0"


def test_a_deliberate_start_skips_the_back_off_once_and_says_so_only_when_there_was_one(clock, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    assert sup.main(["deliberate", "--record", record]) == 0
    assert Path(record + ".deliberate").read_text() == "1000.0"
    assert sup.main(["backoff", "--record", record]) == 0
    assert capsys.readouterr().out == "" and not os.path.exists(record + ".deliberate")
    for t in (990, 995):
        sup.append_record(record, _crash(t))
    sup.main(["deliberate", "--record", record])
    assert sup.main(["backoff", "--record", record]) == 0
    assert clock.slept == []
    assert capsys.readouterr().out == "a start the deployment asked for: no back-off (it would have been 2s)\n"


@pytest.mark.parametrize("mainpid, marked", [("1234", True), ("", False), ("  ", False)])
def test_stop_mark(clock, tmp_path, mainpid, marked):
    record = str(tmp_path / "u.jsonl")
    assert sup.main(["stop-mark", "--record", record, "--mainpid", mainpid]) == 0
    assert os.path.exists(record + ".planned") is marked
    if marked:
        assert Path(record + ".planned").read_text() == "1000.0"


def test_stop_mark_without_a_pid(clock, tmp_path):
    record = str(tmp_path / "u.jsonl")
    assert sup.main(["stop-mark", "--record", record]) == 0
    assert not os.path.exists(record + ".planned")


# --------------------------------------------------------------------------------------------------- record

SIGS = [{"pattern": "rank [0-9] disconnected", "peer": True, "advice": "a peer died"},
        {"pattern": "Traceback", "advice": "the engine crashed"}]


@pytest.fixture
def env(monkeypatch):
    def set_env(result="exit-code", code="exited", status="1"):
        for name, value in (("SERVICE_RESULT", result), ("EXIT_CODE", code), ("EXIT_STATUS", status)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
    set_env()
    return set_env


@pytest.fixture
def runs(monkeypatch):
    calls = []
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append((argv, kw)))
    return calls


def _record(record, *more):
    return sup.main(["record", "--unit", "u.service", "--record", record] + list(more))


def test_record_a_crash_with_its_signature_from_the_log_since_the_start(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    log = tmp_path / "vllm.log"
    log.write_text("Traceback old\n")
    Path(record + ".offset").write_text("14")
    with log.open("a") as fh:
        fh.write("x\nTraceback new\n")
    sigs = tmp_path / "sigs.json"
    sigs.write_text(json.dumps(SIGS))
    sup.append_record(record, _crash(399))         # out of the window
    sup.append_record(record, _crash(400))
    assert _record(record, "--log", str(log), "--signatures", str(sigs)) == 0
    assert sup.read_record(record)[-1] == {
        "t": 1000.0, "event": "exit", "planned": False, "result": "exit-code", "code": "exited", "status": "1",
        "reason": "exited with status 1: Traceback new (the engine crashed)"}
    assert capsys.readouterr().out == (
        "u.service: unplanned exit 2 of 5 allowed within 10 min: exited with status 1: Traceback new (the engine "
        "crashed)\n")
    assert runs == []


def test_record_a_crash_past_the_limit(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    sup.append_record(record, _crash(950))
    assert _record(record, "--restarts", "1", "--window-min", "1") == 0
    assert capsys.readouterr().out.startswith(
        "u.service: crash loop: 2 unplanned exits within 1 min, over the limit of 1 restarts: ")


@pytest.mark.parametrize("content", [None, "not json", ""])
def test_record_without_readable_signatures_says_how_it_ended(clock, env, runs, tmp_path, capsys, content):
    record = str(tmp_path / "u.jsonl")
    log = tmp_path / "vllm.log"
    log.write_text("Traceback\n")
    sigs = tmp_path / "sigs.json"
    if content is not None:
        sigs.write_text(content)
    env(result=None, code=None, status=None)
    args = ["--log", str(log)] + (["--signatures", str(sigs)] if content != "" else [])
    assert _record(record, *args) == 0
    assert sup.read_record(record) == [{"t": 1000.0, "event": "exit", "planned": False, "result": "", "code": "",
                                        "status": "", "reason": "ended (unknown result); no fatal line in the log"}]
    assert capsys.readouterr().out == (
        "u.service: unplanned exit 1 of 5 allowed within 10 min: ended (unknown result); no fatal line in the log\n")


def test_record_without_a_log_reads_none(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    sigs = tmp_path / "sigs.json"
    sigs.write_text(json.dumps(SIGS))
    Path(record + ".offset").write_text("0")
    assert _record(record, "--signatures", str(sigs)) == 0
    assert sup.read_record(record)[-1]["reason"] == "exited with status 1 (exit-code); no fatal line in the log"


def test_record_an_exit_a_peer_caused(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    log = tmp_path / "vllm.log"
    log.write_text("rank 1 disconnected\n")
    sigs = tmp_path / "sigs.json"
    sigs.write_text(json.dumps(SIGS))
    assert _record(record, "--log", str(log), "--signatures", str(sigs)) == 0
    assert sup.read_record(record) == [{
        "t": 1000.0, "event": "exit", "planned": False, "peer": True, "result": "exit-code", "code": "exited",
        "status": "1", "reason": "exited with status 1: rank 1 disconnected (a peer died)"}]
    assert runs == [(["systemctl", "reset-failed", "u.service"],
                     {"check": False, "timeout": 30, "stdout": -3, "stderr": -3})]
    assert capsys.readouterr().out == (
        "u.service: ended with its DP group, whose other member went away (not counted towards the crash loop; "
        "restarting): exited with status 1: rank 1 disconnected (a peer died)\n")


def test_record_a_planned_stop(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    Path(record + ".planned").write_text("1")
    Path(record + ".backoff").write_text("1")
    env(result="success", code="killed", status="TERM")
    assert _record(record) == 0
    assert sup.read_record(record) == [{"t": 1000.0, "event": "exit", "planned": True, "result": "success",
                                        "code": "killed", "status": "TERM", "reset": True,
                                        "reason": "planned stop (systemctl stop/restart)"}]
    assert capsys.readouterr().out == "u.service: planned stop (systemctl stop/restart)\n"
    assert not os.path.exists(record + ".planned") and not os.path.exists(record + ".backoff")
    # a planned restart does not use up the crash loop's allowance: systemd's start-limit counter starts afresh
    assert runs == [(["systemctl", "reset-failed", "u.service"],
                     {"check": False, "timeout": 30, "stdout": -3, "stderr": -3})]


def test_record_the_stop_of_the_canarys_restart_for_the_units_own_failure(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    sup.append_record(record, {"t": 990.0, "event": "canary", "planned": False, "reason": "stopped serving"})
    Path(record + ".planned").write_text("1")
    env(result="success", code="killed", status="TERM")
    assert _record(record) == 0
    assert sup.read_record(record)[-1] == {"t": 1000.0, "event": "exit", "planned": True, "result": "success",
                                           "code": "killed", "status": "TERM",
                                           "reason": "planned stop (systemctl stop/restart)"}
    assert runs == []       # that restart counts towards the crash loop, as a crash does
    assert capsys.readouterr().out == "u.service: planned stop (systemctl stop/restart)\n"


def test_record_a_stop_during_the_back_off(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    Path(record + ".backoff").write_text("1")
    env(result="signal", code="killed", status="TERM")
    assert _record(record) == 0
    assert sup.read_record(record) == [{"t": 1000.0, "event": "exit", "planned": True, "result": "signal",
                                        "code": "killed", "status": "TERM", "reset": True,
                                        "reason": "stopped during its restart back-off (the process never ran)"}]
    assert capsys.readouterr().out == "u.service: stopped during its restart back-off (the process never ran)\n"


# --------------------------------------------------------------------------------------------------- canary

def _canary(tmp_path, monkeypatch, answers, active="active", **settings):
    """Run one canary round; answers[url] = (status, body). Returns (requests, systemctl calls, shown units)."""
    record = str(tmp_path / "u.jsonl")
    cfg = {"unit": "u.service", "record": record, "local": [A], "peers": [P], "model": "m", "timeout": 7,
           "hang_failures": 1, "peer_failures": 1}
    cfg.update(settings)
    config = tmp_path / "canary.json"
    config.write_bytes(json.dumps(cfg, ensure_ascii=False).encode("utf-8"))
    requests, calls, shown = [], [], []

    def answer(url, timeout, body=None, headers=None):
        requests.append((url, timeout, body, headers))
        return answers[url]

    def show(unit, props):
        shown.append((unit, props))
        return {"ActiveState": active}
    monkeypatch.setattr(sup, "systemctl_show", show)
    monkeypatch.setattr(sup, "http_status", answer)
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append((argv, kw)))
    assert sup.main(["canary", "--config", str(config)]) == 0
    return requests, calls, shown


def test_the_canary_of_an_inactive_unit_forgets_its_state_and_asks_nothing(clock, tmp_path, monkeypatch):
    Path(tmp_path / "u.jsonl.canary").write_text('{"hang": {}}')
    requests, calls, shown = _canary(tmp_path, monkeypatch, {}, active="activating")
    assert (requests, calls, shown) == ([], [], [("u.service", ["ActiveState", "InvocationID", "ActiveEnterTimestampMonotonic"])])
    assert not os.path.exists(tmp_path / "u.jsonl.canary")
    assert _canary(tmp_path, monkeypatch, {}, active="failed")[0] == []


def test_a_canary_round_asks_health_then_one_token_and_keeps_its_counters(clock, tmp_path, monkeypatch, capsys):
    ok = (200, {"choices": [{"text": "x"}]})
    answers = {A + "/health": (200, None), A + "/v1/completions": ok, B + "/health": (503, None),
               P + "/health": (200, None), Q + "/health": (0, None)}
    Path(tmp_path / "u.jsonl.canary").write_text("not json")
    requests, calls, _shown = _canary(tmp_path, monkeypatch, answers, local=[A, B], peers=[P, Q], peer_failures=2)
    assert requests == [
        (A + "/health", 5, None, None),
        (A + "/v1/completions", 7, {"model": "m", "prompt": "canary", "max_tokens": 1, "temperature": 0}, {}),
        (B + "/health", 5, None, None),
        (P + "/health", 5, None, None),
        (Q + "/health", 5, None, None)]
    assert calls == [] and capsys.readouterr().out == ""
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {"hang": {A: 0, B: 0}, "peer": {P: 0, Q: 0}}
    assert not os.path.exists(tmp_path / "u.jsonl.canary.tmp") and not os.path.exists(tmp_path / "u.jsonl")
    # the next round goes on from the saved counters, with the settings' own prompt and health timeout
    answers[B + "/health"] = (200, None)
    answers[B + "/v1/completions"] = ok
    requests, calls, _shown = _canary(tmp_path, monkeypatch, answers, local=[A, B], peers=[P, Q], peer_failures=2,
                                      prompt="hi", health_timeout=2)
    assert requests[0] == (A + "/health", 2, None, None) and requests[-1] == (Q + "/health", 2, None, None)
    assert requests[1] == (A + "/v1/completions", 7, {"model": "m", "prompt": "hi", "max_tokens": 1,
                                                      "temperature": 0}, {})
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {"hang": {A: 0, B: 0}, "peer": {P: 0, Q: 1}}


def test_the_canary_restarts_a_hung_rank_and_records_it_as_a_crash(clock, tmp_path, monkeypatch, capsys):
    answers = {A + "/health": (200, None), A + "/v1/completions": (0, None), P + "/health": (200, None)}
    _requests, calls, _shown = _canary(tmp_path, monkeypatch, answers)
    reason = "hung: %s answers /health but produced no token in 1 canary requests in a row" % A
    assert calls == [(["systemctl", "restart", "--no-block", "u.service"], {"check": False, "timeout": 30})]
    assert sup.read_record(str(tmp_path / "u.jsonl")) == [
        {"t": 1000.0, "event": "canary", "planned": False, "reason": reason}]
    assert capsys.readouterr().out == "u.service: %s\n" % reason
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {"hang": {}, "peer": {}}


@pytest.mark.parametrize("after,restarted", [
    ({"ActiveState": "active", "InvocationID": "one"}, True),
    ({"ActiveState": "active", "InvocationID": "two"}, False),
    ({"ActiveState": "activating", "InvocationID": "one"}, False),
    ({}, False)])
def test_a_restart_decided_for_a_start_that_ended_during_the_round_is_dropped(clock, tmp_path, monkeypatch, capsys,
                                                                              after, restarted):
    """A rolling restart may start the unit again while a round asks the old start's ranks: the verdict about the old
    start must not restart the new one."""
    answers = {A + "/health": (200, None), A + "/v1/completions": (0, None), P + "/health": (200, None)}
    shows = [{"ActiveState": "active", "InvocationID": "one"}, after]
    shown = []

    def show(unit, props):
        shown.append(props)
        return dict(shows[len(shown) - 1])

    record = str(tmp_path / "u.jsonl")
    config = tmp_path / "canary.json"
    config.write_text(json.dumps({"unit": "u.service", "record": record, "local": [A], "peers": [P], "model": "m",
                                  "timeout": 7, "hang_failures": 1, "peer_failures": 1}))
    calls = []
    monkeypatch.setattr(sup, "systemctl_show", show)
    monkeypatch.setattr(sup, "http_status", lambda url, timeout, body=None, headers=None: answers[url])
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append(argv))
    assert sup.main(["canary", "--config", str(config)]) == 0
    reason = "hung: %s answers /health but produced no token in 1 canary requests in a row" % A
    assert shown == [["ActiveState", "InvocationID", "ActiveEnterTimestampMonotonic"], ["ActiveState", "InvocationID"]]
    out = capsys.readouterr().out
    state = json.loads(Path(record + ".canary").read_text())
    if restarted:
        assert calls == [["systemctl", "restart", "--no-block", "u.service"]] and out == "u.service: %s\n" % reason
        assert len(sup.read_record(record)) == 1
    else:
        assert calls == [] and sup.read_record(record) == [] and state == {}
        assert out == ("u.service: no restart: the unit started or stopped again during this round (the verdict "
                       "was: %s); the next round judges its new start\n" % reason)


def test_the_canary_restart_for_a_peer_resets_the_start_limit_first(clock, tmp_path, monkeypatch, capsys):
    answers = {A + "/health": (200, None), A + "/v1/completions": (200, {"choices": [{"text": "x"}]}),
               P + "/health": (0, None)}
    _requests, calls, _shown = _canary(tmp_path, monkeypatch, answers)
    reason = ("DP group incomplete: %s has failed /health for 1 checks while this node's ranks serve; restarting "
              "them so the whole group forms again" % P)
    assert [argv for argv, _kw in calls] == [["systemctl", "reset-failed", "u.service"],
                                             ["systemctl", "restart", "--no-block", "u.service"]]
    assert sup.read_record(str(tmp_path / "u.jsonl")) == [
        {"t": 1000.0, "event": "canary", "planned": False, "peer": True, "reason": reason}]
    assert capsys.readouterr().out == "u.service: %s\n" % reason


def test_the_canary_reports_a_refused_key_with_its_source(clock, tmp_path, monkeypatch, capsys):
    key = tmp_path / "key"
    key.write_text("k1\n")
    answers = {A + "/health": (200, None), A + "/v1/completions": (403, None), P + "/health": (200, None)}
    requests, calls, _shown = _canary(tmp_path, monkeypatch, answers, api_key_file=str(key))
    assert requests[1][3] == {"Authorization": "Bearer k1"} and calls == []
    out = capsys.readouterr().out
    assert out.startswith("u.service: %s refused the canary request with HTTP 403 (unauthorized: the canary sends the "
                          "key in %s). Not a hang" % (A, key)) and out.count("\n") == 1 and "k1" not in out
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {
        "hang": {}, "peer": {P: 0}, "unauthorized": {A: 403}}
    key.write_text("")
    _canary(tmp_path, monkeypatch, dict(answers, **{A + "/v1/completions": (401, None)}), api_key_file=str(key))
    assert capsys.readouterr().out.startswith(
        "u.service: %s refused the canary request with HTTP 401 (unauthorized: the canary sends no key (%s is empty))"
        % (A, key))


# --------------------------------------------------------------------------------------------------- status

@pytest.mark.parametrize("content, expected", [
    ('{"unauthorized": {"http://b": 403, "http://a": 401}}', ["http://a (HTTP 401)", "http://b (HTTP 403)"]),
    ('{"unauthorized": null, "hang": {}}', []),
    ('{"hang": {}}', []),
    ("[1]", []),
    ("not json", []),
    (None, []),
])
def test_canary_unauthorized(tmp_path, content, expected):
    record = tmp_path / "u.jsonl"
    if content is not None:
        Path(str(record) + ".canary").write_text(content)
    assert sup.canary_unauthorized(str(record)) == expected


@pytest.mark.parametrize("state, expected", [
    ({"held": {"by": "http://p", "since": 940}}, "http://p since 1970-01-01 00:15:40"),
    ({"held": {"by": "http://p"}}, ""),
    ({"held": {"since": 940}}, ""),
    ({"held": {"by": "http://p", "since": "x"}}, ""),
    ({"held": None}, ""),
    ({"held": []}, ""),
    ({}, ""),
])
def test_canary_held(clock, state, expected):
    assert sup.canary_held(state) == expected


def test_the_canary_state_is_read_as_an_object_or_nothing(tmp_path):
    record = str(tmp_path / "u.jsonl")
    assert sup.read_canary_state(record) == {}
    for text, expected in (('{"hang": {}}', {"hang": {}}), ("[1]", {}), ("not json", {})):
        Path(record + ".canary").write_text(text)
        assert sup.read_canary_state(record) == expected


def test_status_of_units_pins_the_whole_answer(clock, tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "a.service.jsonl")
    for event in (_crash(100), dict(_crash(939), reason="old"), dict(_crash(940), reason="boom"),
                  {"t": 950, "event": "exit", "planned": True, "reason": "planned stop"}):
        sup.append_record(record, event)
    Path(record + ".canary").write_text('{"unauthorized": {"%s": 401}, "held": {"by": "%s", "since": 940}}' % (A, P))
    shown = []

    def show(unit, props):
        shown.append((unit, props))
        return {"ActiveState": "active", "SubState": "running", "Result": "success", "UnitFileState": "enabled"}
    monkeypatch.setattr(sup, "systemctl_show", show)
    assert sup.main(["status", "--state-dir", str(tmp_path), "--unit", "a.service", "--unit", "b.service",
                     "--window-min", "1"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps([
        {"active": "active", "canary_unauthorized": [A + " (HTTP 401)"], "enabled": "enabled", "gave_up": False,
         "held_by": P + " since 1970-01-01 00:15:40", "last_reason": "boom", "last_time": "1970-01-01 00:15:40", "restarts": 3, "restarts_in_window": 1,
         "sub": "running", "unit": "a.service"},
        {"active": "active", "canary_unauthorized": [], "enabled": "enabled", "gave_up": False, "held_by": "",
         "last_reason": "",
         "last_time": "", "restarts": 0, "restarts_in_window": 0, "sub": "running", "unit": "b.service"}]) + "\n"
    assert shown == [(u, ["ActiveState", "SubState", "Result", "NRestarts", "UnitFileState"])
                     for u in ("a.service", "b.service")]


def test_status_with_the_default_window(clock, tmp_path, monkeypatch, capsys):
    record = str(tmp_path / "a.service.jsonl")
    for t in (399, 400, 990):
        sup.append_record(record, _crash(t))
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: {"Result": "start-limit-hit"})
    assert sup.main(["status", "--state-dir", str(tmp_path), "--unit", "a.service"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"active": "unknown", "canary_unauthorized": [], "enabled": "", "gave_up": True, "held_by": "", "last_reason": "x",
         "last_time": "1970-01-01 00:16:30", "restarts": 3, "restarts_in_window": 2, "sub": "", "unit": "a.service"}]
    assert sup.main(["status", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "[]\n"


# ----------------------------------------------------------------------------------------------- command line

def _parsed(argv):
    args = vars(sup.parser().parse_args(argv))
    return args.pop("func"), args


def test_the_command_line_defaults():
    assert _parsed(["wait"]) == (sup.cmd_wait, {
        "cmd": "wait", "container": "", "tcp": [], "what": [], "file": [], "file_what": [], "pid": "",
        "timeout": 300, "soft_tcp": [], "soft_what": [], "soft_timeout": 60, "log": "", "interval": 2})
    assert _parsed(["backoff", "--record", "r"]) == (sup.cmd_backoff, {
        "cmd": "backoff", "record": "r", "log": "", "base": 2, "max": 60, "window_min": 10})
    assert _parsed(["deliberate", "--record", "r"]) == (sup.cmd_deliberate, {"cmd": "deliberate", "record": "r"})
    assert _parsed(["stop-mark", "--record", "r"]) == (sup.cmd_stop_mark, {
        "cmd": "stop-mark", "record": "r", "mainpid": ""})
    assert _parsed(["record", "--unit", "u", "--record", "r"]) == (sup.cmd_record, {
        "cmd": "record", "unit": "u", "record": "r", "log": "", "signatures": "", "restarts": 5, "window_min": 10})
    assert _parsed(["canary", "--config", "c"]) == (sup.cmd_canary, {"cmd": "canary", "config": "c"})
    assert _parsed(["status", "--state-dir", "d"]) == (sup.cmd_status, {
        "cmd": "status", "state_dir": "d", "unit": [], "window_min": 10})


def test_the_command_line_options_and_their_types():
    assert _parsed(["wait", "--container", "c", "--tcp", "h:1", "--tcp", "h:2", "--what", "w", "--file", "f",
                    "--file-what", "fw", "--pid", "9", "--timeout", "1.5", "--soft-tcp", "h:3", "--soft-what", "sw",
                    "--soft-timeout", "2.5", "--log", "l", "--interval", "0.5"])[1] == {
        "cmd": "wait", "container": "c", "tcp": ["h:1", "h:2"], "what": ["w"], "file": ["f"], "file_what": ["fw"],
        "pid": "9", "timeout": 1.5, "soft_tcp": ["h:3"], "soft_what": ["sw"], "soft_timeout": 2.5, "log": "l",
        "interval": 0.5}
    assert _parsed(["backoff", "--record", "r", "--log", "l", "--base", "0.5", "--max", "9.5",
                    "--window-min", "1.5"])[1] == {
        "cmd": "backoff", "record": "r", "log": "l", "base": 0.5, "max": 9.5, "window_min": 1.5}
    assert _parsed(["record", "--unit", "u", "--record", "r", "--log", "l", "--signatures", "s", "--restarts", "3",
                    "--window-min", "2.5"])[1] == {
        "cmd": "record", "unit": "u", "record": "r", "log": "l", "signatures": "s", "restarts": 3, "window_min": 2.5}
    assert _parsed(["stop-mark", "--record", "r", "--mainpid", "7"])[1]["mainpid"] == "7"
    assert _parsed(["status", "--state-dir", "d", "--unit", "a", "--unit", "b", "--window-min", "0.5"])[1] == {
        "cmd": "status", "state_dir": "d", "unit": ["a", "b"], "window_min": 0.5}


@pytest.mark.parametrize("argv", [
    [], ["backoff"], ["deliberate"], ["stop-mark"], ["record", "--unit", "u"], ["record", "--record", "r"],
    ["canary"], ["status"], ["record", "--unit", "u", "--record", "r", "--restarts", "1.5"], ["wait", "--timeout", "x"],
])
def test_the_command_line_refuses_what_is_missing_or_malformed(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        sup.main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("usage: a3_supervise ")


def test_the_help_names_the_helper_and_explains_the_options(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit):
        sup.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: a3_supervise [-h]")
    assert "\nNode-side helper of the systemd units of ascend.vllm_pd (installed by the role supervise).\n" in out
    with pytest.raises(SystemExit):
        sup.main(["wait", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--tcp TCP HOST:PORT that must accept connections (HOST:PORT,HOST:PORT,...: any one of them)",
                 "--what WHAT what each --tcp is, for the message",
                 "--file FILE a file that must exist (a readiness mark)",
                 "--file-what FILE_WHAT what each --file means, for the message",
                 "--pid PID fail at once when this process ended (ExecStartPost: ${MAINPID})",
                 "--soft-tcp SOFT_TCP HOST:PORT worth waiting for, not required",
                 "--log LOG also note soft waits in this log file"):
        assert text in out, text


@pytest.fixture
def ascii_locale():
    """The process' locale says ASCII (a unit started without LANG, say): the helper's files are UTF-8 all the same."""
    import locale
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_record_reads_utf8_signatures_under_an_ascii_locale(ascii_locale, clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    log = tmp_path / "vllm.log"
    log.write_bytes("错误: 设备内存不足\n".encode("utf-8"))
    sigs = tmp_path / "sigs.json"
    sigs.write_bytes(json.dumps([{"pattern": "内存不足", "advice": "out of device memory"}],
                                ensure_ascii=False).encode("utf-8"))
    assert _record(record, "--log", str(log), "--signatures", str(sigs)) == 0
    assert sup.read_record(record)[-1]["reason"] == "exited with status 1: 错误: 设备内存不足 (out of device memory)"
    capsys.readouterr()


def test_the_canary_reads_utf8_settings_and_state_under_an_ascii_locale(ascii_locale, clock, tmp_path, monkeypatch,
                                                                        capsys):
    Path(tmp_path / "u.jsonl.canary").write_bytes('{"hang": {"%s": 0}, "note": "ü"}'.encode("utf-8") % A.encode())
    answers = {A + "/health": (200, None), A + "/v1/completions": (0, None), P + "/health": (200, None)}
    requests, calls, _shown = _canary(tmp_path, monkeypatch, answers, model="模型", hang_failures=2)
    assert requests[1][2]["model"] == "模型" and calls == []
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {"hang": {A: 1}, "peer": {P: 0}, "note": "ü"}


def test_backoff_under_a_second_and_a_crash_just_out_of_the_window(clock, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    for t in (399, 990, 995):      # 601 s ago: out of the 10 min window
        sup.append_record(record, _crash(t))
    assert sup.main(["backoff", "--record", record, "--base", "0.5"]) == 0
    assert clock.slept == [0.5]
    assert capsys.readouterr().out == "back-off: waiting 0.5s before restarting (2 crashes within 10 min)\n"
    sup.main(["deliberate", "--record", record])
    assert sup.main(["backoff", "--record", record, "--base", "0.5"]) == 0
    assert clock.slept == [0.5]
    assert capsys.readouterr().out == "a start the deployment asked for: no back-off (it would have been 0.5s)\n"


def test_record_without_a_log_matches_no_signature_not_even_a_catch_all(clock, env, runs, tmp_path, capsys):
    record = str(tmp_path / "u.jsonl")
    sigs = tmp_path / "sigs.json"
    sigs.write_text(json.dumps([{"pattern": ".*", "advice": "anything"}]))
    assert _record(record, "--signatures", str(sigs)) == 0
    assert sup.read_record(record)[-1]["reason"] == "exited with status 1 (exit-code); no fatal line in the log"
    capsys.readouterr()


def test_a_rank_down_keeps_its_refused_key_and_the_next_rank_is_still_asked(clock, tmp_path, monkeypatch, capsys):
    Path(tmp_path / "u.jsonl.canary").write_text(json.dumps({"hang": {}, "peer": {}, "unauthorized": {A: 401}}))
    answers = {A + "/health": (503, None), B + "/health": (200, None),
               B + "/v1/completions": (200, {"choices": [{"text": "x"}]}), P + "/health": (200, None)}
    requests, calls, _shown = _canary(tmp_path, monkeypatch, answers, local=[A, B])
    assert [r[0] for r in requests] == [A + "/health", B + "/health", B + "/v1/completions", P + "/health"]
    assert calls == [] and capsys.readouterr().out == ""
    assert json.loads(Path(tmp_path / "u.jsonl.canary").read_text()) == {
        "hang": {A: 0, B: 0}, "peer": {P: 0}, "unauthorized": {A: 401}}


# ----------------------------------------------------------------------------------- canary: the timed rules

def _timed_round(tmp_path, monkeypatch, answers, shown, **settings):
    record = str(tmp_path / "u.jsonl")
    cfg = {"unit": "u.service", "record": record, "local": [A], "peers": [P], "model": "m", "timeout": 7,
           "hang_failures": 2, "peer_failures": 3, "down_grace": 20, "start_timeout": 100, "peer_wait": 45}
    cfg.update(settings)
    (tmp_path / "canary.json").write_text(json.dumps(cfg))
    calls = []
    monkeypatch.setattr(sup, "systemctl_show", lambda unit, props: dict(shown))
    monkeypatch.setattr(sup, "http_status", lambda url, timeout, body=None, headers=None: answers[url])
    monkeypatch.setattr(sup.subprocess, "run", lambda argv, **kw: calls.append(argv))
    assert sup.main(["canary", "--config", str(tmp_path / "canary.json")]) == 0
    return calls, json.loads(Path(record + ".canary").read_text()) if os.path.exists(record + ".canary") else None


def test_a_frozen_local_rank_is_restarted_by_its_own_node_after_the_grace(clock, tmp_path, monkeypatch, capsys):
    shown = {"ActiveState": "active", "InvocationID": "inv1", "ActiveEnterTimestampMonotonic": "900000000"}
    ok = {A + "/health": (200, None), A + "/v1/completions": (200, {"choices": [{"text": "x"}]}),
          P + "/health": (200, None)}
    frozen = dict(ok, **{A + "/health": (0, None)})
    calls, state = _timed_round(tmp_path, monkeypatch, ok, shown)
    assert calls == [] and state["invocation"] == "inv1" and state["answered"] == [A]
    clock.now += 10
    calls, state = _timed_round(tmp_path, monkeypatch, frozen, shown)
    assert calls == [] and state["down_since"] == {A: 1010.0}
    clock.now += 20
    calls, _state = _timed_round(tmp_path, monkeypatch, frozen, shown)
    assert calls == [["systemctl", "restart", "--no-block", "u.service"]]     # its own crash: no reset-failed
    event = sup.read_record(str(tmp_path / "u.jsonl"))[-1]
    assert event["reason"].startswith("stopped serving: %s answered /health since this start, then failed it for 20s"
                                      % A) and "peer" not in event


def test_a_new_start_of_the_unit_forgets_the_ranks_but_keeps_what_was_refused(clock, tmp_path, monkeypatch):
    (tmp_path / "u.jsonl.canary").write_text(json.dumps({
        "invocation": "old", "answered": [A], "down_since": {A: 1.0}, "hang": {A: 1}, "peer": {},
        "unauthorized": {A: 401}, "peer_restarted": [P], "held": {"by": P, "since": 1.0}}))
    shown = {"ActiveState": "active", "InvocationID": "new", "ActiveEnterTimestampMonotonic": "995000000"}
    answers = {A + "/health": (0, None), P + "/health": (0, None)}
    calls, state = _timed_round(tmp_path, monkeypatch, answers, shown)
    # A never answered since this start (5 s ago): no frozen-rank restart from the old start's record
    assert calls == []
    assert state == {"invocation": "new", "answered": [], "down_since": {A: 1000.0}, "hang": {A: 0}, "peer": {P: 0},
                     "unauthorized": {A: 401}, "peer_restarted": [P]}
    # the start timeout counts from systemd's start time: 100 s after it the rank that never answered restarts
    clock.now += 94
    calls, _state = _timed_round(tmp_path, monkeypatch, answers, shown)
    assert calls == []
    clock.now += 1
    calls, _state = _timed_round(tmp_path, monkeypatch, answers, shown)
    assert calls == [["systemctl", "restart", "--no-block", "u.service"]]
    assert sup.read_record(str(tmp_path / "u.jsonl"))[-1]["reason"].startswith("never served: %s" % A)


def test_a_held_group_says_so_once_then_restarts_as_a_peer_exit(clock, tmp_path, monkeypatch, capsys):
    shown = {"ActiveState": "active", "InvocationID": "i", "ActiveEnterTimestampMonotonic": "1"}
    stalled = {A + "/health": (200, None), A + "/v1/completions": (0, None), P + "/health": (0, None)}
    for _unused in range(3):
        calls, state = _timed_round(tmp_path, monkeypatch, stalled, shown)
        assert calls == []
        clock.now += 15
    assert state["held"] == {"by": P, "since": 1000.0}
    assert capsys.readouterr().out == (
        "u.service: DP group held by %s: it fails /health while this node's ranks produce no token; waiting up to "
        "45s for its own node to restart it (no restart here meanwhile)\n" % P)
    calls, _state = _timed_round(tmp_path, monkeypatch, stalled, shown)
    assert calls == [["systemctl", "reset-failed", "u.service"], ["systemctl", "restart", "--no-block", "u.service"]]
    event = sup.read_record(str(tmp_path / "u.jsonl"))[-1]
    assert event["peer"] is True and event["reason"].startswith("DP group held by %s: it has failed /health for 45s"
                                                                % P)
