# -*- coding: utf-8 -*-
"""engine_wait: readiness from /health, early failure from the log or a dead launcher (pure loop)."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _engine_wait as W

SIGS = [
    {"pattern": "Address already in use", "advice": "port"},
    {"pattern": "Timed out waiting for engines", "advice": "dp"},
    {"pattern": r"Traceback \(most recent call last\)", "advice": "crash"},
]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def run(tmp_path, lines_per_poll, ready_after=None, alive=None, timeout=60, fatal=True):
    log = tmp_path / "vllm_log.log"
    log.write_text("")
    clock, polls = Clock(), {"n": 0}

    def prober(url):
        polls["n"] += 1
        n = polls["n"]
        if n - 1 < len(lines_per_poll):
            with open(log, "a") as fh:
                fh.write(lines_per_poll[n - 1])
        return ready_after is not None and n >= ready_after
    return W.wait(["http://x/health"], str(log), SIGS, timeout, 5, clock=clock, sleep=clock.sleep,
                  prober=prober, alive=alive, signatures_fatal=fatal)


def test_ready_when_health_answers(tmp_path):
    res = run(tmp_path, ["starting\n", "loading\n"], ready_after=3)
    assert res["ok"] and res["pending"] == []


def test_specific_signature_wins_over_traceback(tmp_path):
    text = "Traceback (most recent call last):\n  ...\nzmq.error.ZMQError: Address already in use (addr='tcp://1.2.3.4:30120')\n"
    res = run(tmp_path, ["", text])
    assert not res["ok"] and res["signature"]["advice"] == "port" and "30120" in res["line"]


def test_log_written_in_the_same_poll_is_not_missed(tmp_path):
    # the probe writes the fatal line after the read of that poll: the next poll sees it
    res = run(tmp_path, ["ok\n", "TimeoutError: Timed out waiting for engines to send initial message\n"])
    assert res["signature"]["advice"] == "dp"


def test_dead_launcher_reads_its_last_words(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("")

    def alive():
        log.write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
        return False
    res = W.wait(["http://x/health"], str(log), SIGS, 60, 5, clock=Clock(), sleep=lambda s: None,
                 prober=lambda u: False, alive=alive)
    assert res["signature"]["advice"] == "crash" and "boom" in res["log_tail"]


def test_dead_launcher_without_log(tmp_path):
    res = run(tmp_path, [], alive=lambda: False)
    assert res["signature"]["pattern"] == "launcher exited"


def test_timeout_names_pending(tmp_path):
    res = run(tmp_path, [], timeout=12)
    assert not res["ok"] and res["signature"] is None and res["pending"] == ["http://x/health"] and res["waited"] >= 12


def test_only_text_after_the_offset_counts(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("zmq.error.ZMQError: Address already in use (old run)\n")
    clock = Clock()
    res = W.wait(["u"], str(log), SIGS, 10, 5, start_offset=log.stat().st_size, clock=clock, sleep=clock.sleep,
                 prober=lambda u: False)
    assert res["signature"] is None


def test_truncated_log_restarts_from_zero(tmp_path):
    log = tmp_path / "l"
    log.write_text("abc")
    assert W.read_from(str(log), 100) == ("abc", 3)
    assert W.read_from(str(tmp_path / "missing"), 5) == ("", 5)


def test_supervised_wait_rides_out_a_crash_the_supervisor_recovers(tmp_path):
    # found running (nothing started by this run): a crash line then recovery is not a failure
    crash = "Traceback (most recent call last):\nEngineDeadError\n"
    res = run(tmp_path, ["", crash, "restarting\n", "up\n"], ready_after=4, fatal=False)
    assert res["ok"] and res["pending"] == []


def test_supervised_wait_explains_a_timeout_with_the_newest_signature(tmp_path):
    res = run(tmp_path, ["", "zmq.error.ZMQError: Address already in use\n"], fatal=False, timeout=30)
    assert not res["ok"] and res["signature"]["advice"] == "port" and res["waited"] >= 30
    assert res["pending"] == ["http://x/health"]


def test_strict_wait_still_stops_at_the_first_signature(tmp_path):
    res = run(tmp_path, ["", "zmq.error.ZMQError: Address already in use\n"], ready_after=4, timeout=30)
    assert not res["ok"] and res["signature"]["advice"] == "port" and res["waited"] < 30
