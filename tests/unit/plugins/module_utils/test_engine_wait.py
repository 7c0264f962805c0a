# -*- coding: utf-8 -*-
"""engine_wait: readiness from /health, early failure from the log or a dead launcher (pure loop)."""
from __future__ import annotations

import http.server

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _engine_wait as W
from helpers import loopback_server

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


def ticking():
    """A clock that the wait's sleep moves on: a wait that misses its way out ends at its timeout, never hangs."""
    clock = Clock()
    return {"clock": clock, "sleep": clock.sleep}


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
    res = W.wait(["http://x/health"], str(log), SIGS, 60, 5, **ticking(),
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


# --- the exact result of each way out, the ranks, the clock, the log (issue 37: surviving mutants) ---

class Resp:
    def __init__(self, status):
        self.status = status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        code = {"/health": 200}.get(self.path.split("?")[0], 503)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    yield from loopback_server(Handler)


def test_probe_asks_the_url_with_its_timeout(monkeypatch):
    calls = []

    def fake_open_url(*args, **kwargs):
        calls.append((args, kwargs))
        return Resp(200)
    monkeypatch.setattr(W, "open_url", fake_open_url)
    assert W.probe("http://h:1/health") is True
    assert W.probe("http://h:2/health", timeout=7) is True
    assert calls == [(("http://h:1/health",), {"timeout": 3.0}), (("http://h:2/health",), {"timeout": 7})]


@pytest.mark.parametrize("status, up", [(200, True), (201, False), (204, False), (503, False)])
def test_probe_counts_only_200_as_up(monkeypatch, status, up):
    monkeypatch.setattr(W, "open_url", lambda *a, **k: Resp(status))
    assert W.probe("http://h/health") is up


def test_probe_against_a_real_server(server):
    assert W.probe(server + "/health") is True
    assert W.probe(server + "/starting") is False  # 503: open_url raises HTTPError (a URLError)
    assert W.probe("http://127.0.0.1:1/health", timeout=2) is False  # nothing listens on port 1
    assert W.probe("not a url", timeout=2) is False


def test_one_rank_down_of_several_is_not_ready(server):
    urls = [server + "/health", server + "/starting", "http://127.0.0.1:1/health", server + "/health?rank=3"]
    clock = Clock()
    res = W.wait(urls, None, SIGS, 5, 5, clock=clock, sleep=clock.sleep)
    assert res == {"ok": False, "ready": [urls[0], urls[3]], "pending": [urls[1], urls[2]], "waited": 5.0,
                   "log_tail": "", "signature": None, "line": None}


def test_wait_probes_every_rank_each_poll_and_needs_all_of_them(tmp_path):
    urls = ["http://a:9000/health", "http://a:9001/health", "http://b:9000/health"]
    asked = []

    def prober(url):
        asked.append(url)
        return url != "http://a:9001/health"
    clock = Clock()
    res = W.wait(urls, None, SIGS, 10, 5, clock=clock, sleep=clock.sleep, prober=prober)
    assert res["ok"] is False
    assert res["ready"] == ["http://a:9000/health", "http://b:9000/health"]
    assert res["pending"] == ["http://a:9001/health"]
    assert asked == urls * 3  # t = 0, 5 and 10


def test_all_ranks_up_is_the_full_success_result(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("loading\nready\n")
    urls = ["http://a/health", "http://b/health"]
    res = W.wait(urls, str(log), SIGS, 60, 5, **ticking(), prober=lambda u: True)
    assert res == {"ok": True, "ready": urls, "pending": [], "waited": 0.0, "log_tail": "loading\nready",
                   "signature": None, "line": None}


def test_fatal_signature_is_the_full_failure_result(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("start\n  zmq.error.ZMQError: Address already in use (addr='tcp://1.2.3.4:30120')  \n")
    res = W.wait(["http://a/health", "http://b/health"], str(log), SIGS, 60, 5, **ticking(),
                 prober=lambda u: u == "http://a/health")
    assert res == {"ok": False, "ready": ["http://a/health"], "pending": ["http://b/health"], "waited": 0.0,
                   "log_tail": "start\n  zmq.error.ZMQError: Address already in use (addr='tcp://1.2.3.4:30120')  ",
                   "signature": SIGS[0],
                   "line": "zmq.error.ZMQError: Address already in use (addr='tcp://1.2.3.4:30120')"}


def test_dead_launcher_with_a_signature_is_the_full_failure_result(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("start\n")

    def alive():
        with open(log, "a") as fh:
            fh.write("TimeoutError: Timed out waiting for engines\n")
        return False
    res = W.wait(["http://a/health"], str(log), SIGS, 60, 5, **ticking(),
                 prober=lambda u: False, alive=alive)
    assert res == {"ok": False, "ready": [], "pending": ["http://a/health"], "waited": 0.0,
                   "log_tail": "start\nTimeoutError: Timed out waiting for engines",
                   "signature": SIGS[1], "line": "TimeoutError: Timed out waiting for engines"}


def test_dead_launcher_without_a_signature_is_the_full_failure_result(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("start\n")
    res = W.wait(["http://a/health", "http://b/health"], str(log), SIGS, 60, 5, **ticking(),
                 prober=lambda u: u == "http://b/health", alive=lambda: False)
    assert res == {"ok": False, "ready": ["http://b/health"], "pending": ["http://a/health"], "waited": 0.0,
                   "log_tail": "start",
                   "signature": {"pattern": "launcher exited",
                                 "advice": "the launcher and all its engines exited: read the log tail below"},
                   "line": "(no engine process left)"}


def test_live_launcher_keeps_the_wait_going(tmp_path):
    clock = Clock()
    res = W.wait(["http://a/health"], None, SIGS, 10, 5, clock=clock, sleep=clock.sleep, prober=lambda u: False,
                 alive=lambda: True)
    assert res["ok"] is False and res["signature"] is None and res["waited"] == 10.0


def test_timeout_with_a_signature_is_the_full_failure_result(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("Traceback (most recent call last):\nEngineDeadError\n")
    clock = Clock()
    res = W.wait(["http://a/health"], str(log), SIGS, 10, 5, clock=clock, sleep=clock.sleep, prober=lambda u: False,
                 signatures_fatal=False)
    assert res == {"ok": False, "ready": [], "pending": ["http://a/health"], "waited": 10.0,
                   "log_tail": "Traceback (most recent call last):\nEngineDeadError",
                   "signature": SIGS[2], "line": "Traceback (most recent call last):"}


def test_timeout_is_reached_at_exactly_the_timeout():
    clock, polls = Clock(), []
    res = W.wait(["u"], None, SIGS, 10, 5, clock=clock, sleep=clock.sleep, prober=polls.append)
    assert polls == ["u", "u", "u"]  # t = 0, 5, 10: no poll at 15
    assert res == {"ok": False, "ready": [], "pending": ["u"], "waited": 10.0, "log_tail": "", "signature": None,
                   "line": None}


def test_waited_counts_from_the_start_on_a_clock_far_from_zero():
    clock = Clock()
    clock.t = 1000.0
    polls = []
    res = W.wait(["u"], None, SIGS, 1, 1.26, clock=clock, sleep=clock.sleep, prober=polls.append)
    assert len(polls) == 2  # t = 1000 (0 s waited) then 1001.26 (past the timeout)
    assert res["waited"] == 1.3 and isinstance(res["waited"], float)


def test_a_signature_is_fatal_by_default(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("")
    clock = Clock()

    def prober(url):
        if clock.t == 5:
            log.write_text("Address already in use\n")
        return False
    res = W.wait(["u"], str(log), SIGS, 60, 5, clock=clock, sleep=clock.sleep, prober=prober)
    assert res["ok"] is False and res["signature"] == SIGS[0] and res["waited"] == 10.0


def test_the_log_is_read_from_its_first_byte_by_default(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("Address already in use\n")
    res = W.wait(["u"], str(log), [{"pattern": "^Address", "advice": "port"}], 60, 5, **ticking(),
                 prober=lambda u: False)
    assert res["line"] == "Address already in use" and res["log_tail"] == "Address already in use"


def test_no_log_path_reads_nothing():
    for log_path in (None, ""):
        res = W.wait(["u"], log_path, SIGS, 0, 5, **ticking(), prober=lambda u: True)
        assert res == {"ok": True, "ready": ["u"], "pending": [], "waited": 0.0, "log_tail": "", "signature": None,
                       "line": None}


def test_the_log_tail_is_the_last_30_lines_of_everything_read(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("".join("line %d\n" % i for i in range(20)))
    clock = Clock()

    def prober(url):
        with open(log, "a") as fh:
            fh.write("".join("more %d\n" % i for i in range(20)))
        return False
    res = W.wait(["u"], str(log), SIGS, 5, 5, clock=clock, sleep=clock.sleep, prober=prober)
    # poll 1 read the first 20 lines, poll 2 the 20 more written at poll 1 (the 20 of poll 2 are not read yet)
    assert res["log_tail"] == "\n".join(["line %d" % i for i in range(10, 20)] + ["more %d" % i for i in range(20)])


def test_the_log_kept_in_memory_is_bounded(tmp_path):
    log = tmp_path / "vllm_log.log"
    log.write_text("Z" + "y" * 200000)
    clock = Clock()
    res = W.wait(["u"], str(log), [{"pattern": "Z", "advice": "z"}], 0, 5, clock=clock, sleep=clock.sleep,
                 prober=lambda u: False, signatures_fatal=False)
    # the first 200000 characters kept, not 200001: the Z fell out, so the timeout has no signature to name
    assert res["log_tail"] == "y" * 200000 and res["signature"] is None and res["line"] is None


def test_tail_keeps_the_last_30_lines_joined_by_newlines():
    text = "".join("l%d\n" % i for i in range(40))
    assert W.tail(text) == "\n".join("l%d" % i for i in range(10, 40))
    assert W.tail("a\nb\nc", 2) == "b\nc"


def test_read_from_replaces_undecodable_bytes(tmp_path):
    log = tmp_path / "l"
    log.write_bytes(b"ok \xff\xfe end\n")
    assert W.read_from(str(log), 0) == ("ok \ufffd\ufffd end\n", 10)


def test_read_from_restarts_only_when_the_file_shrank_below_the_offset(tmp_path):
    log = tmp_path / "l"
    log.write_text("abc")
    assert W.read_from(str(log), 3) == ("", 3)  # nothing new
    assert W.read_from(str(log), 4) == ("abc", 3)  # one byte shorter than read before: truncated
    assert W.read_from(str(log), 1) == ("bc", 3)
