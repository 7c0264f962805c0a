"""Tests for sim/lib/loadgen.py: a tiny switchable HTTP server on 127.0.0.1 and pure summary tests.

Plain pytest, standard library only; the whole file runs in a few seconds.
"""

import importlib.util
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("loadgen", REPO / "sim" / "lib" / "loadgen.py")
loadgen = importlib.util.module_from_spec(_spec)
sys.modules["loadgen"] = loadgen
_spec.loader.exec_module(loadgen)

MODEL = "glm-5.1"


# ----------------------------------------------------------------------------- fake proxy

class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _json(self, code, obj, extra_headers=()):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, code, data, ctype="text/plain"):
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events, last_chunk=True):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for ev in events:
            data = b"data: " + (ev if isinstance(ev, bytes) else json.dumps(ev).encode()) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        if last_chunk:
            self.wfile.write(b"0\r\n\r\n")

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        with server.lock:
            server.seen.append(body)
            server.auth.append(self.headers.get("authorization"))
        stream = bool(body.get("stream"))
        mode = server.mode
        text = {"choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": None}]}
        if mode == "good":
            if stream:
                return self._sse([{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                                  text, {"choices": [], "usage": {"completion_tokens": 1}}, b"[DONE]"])
            return self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}],
                                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
        if mode == "503":
            return self._json(503, {"error": {"message": "no decode instance", "code": 503}},
                              [("Retry-After", "1")])
        if mode == "empty":
            return self._raw(200, b"", "application/json")
        if mode == "no_content":
            if stream:
                return self._sse([b"[DONE]"])
            return self._json(200, {"choices": [], "usage": {"completion_tokens": 0}})
        if mode == "stream_error":
            if stream:
                return self._sse([text, {"error": {"message": "KV transfer failed", "code": 500}}, b"[DONE]"])
            return self._json(500, {"error": {"message": "KV transfer failed", "code": 500}})
        if mode == "plain500":
            return self._raw(500, b"Internal Server Error")
        if mode == "garbage200":
            return self._raw(200, b"hello, this is not JSON")
        if mode == "slow":
            time.sleep(server.slow_s)
            try:
                return self._json(200, {"choices": [{"message": {"content": "late"}}],
                                        "usage": {"completion_tokens": 1}})
            except OSError:
                return None
        if mode == "reset":
            self.close_connection = True
            return None  # close without a status line
        if mode in ("killed_after_role", "killed_after_content"):
            # the answering process dies mid-answer: the status and a first part, then the connection ends
            if stream:
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
                if mode == "killed_after_content":
                    events.append(text)
                self._sse(events, last_chunk=False)
            else:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "200")
                self.end_headers()
                self.wfile.write(b'{"choices": [')
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        raise AssertionError(f"unknown mode {mode}")


@pytest.fixture
def fake():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHandler)
    server.daemon_threads = True
    server.mode = "good"
    server.slow_s = 1.0
    server.lock = threading.Lock()
    server.seen = []
    server.auth = []
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


def run_load(base, seconds, **kw):
    kw.setdefault("clients", 2)
    kw.setdefault("timeout", 2.0)
    kw.setdefault("interval", 0.05)
    load = loadgen.Load(base, MODEL, **kw).start()
    time.sleep(seconds)
    return load, load.stop()


# ----------------------------------------------------------------------------- classification

@pytest.mark.parametrize("mode, kind, retry_after", [
    ("good", "good", False),
    ("503", "honest_error", True),
    ("empty", "empty_200", False),
    ("no_content", "empty_200", False),
    ("stream_error", "honest_error", False),
    ("plain500", "bad", False),
    ("garbage200", "bad", False),
    ("reset", "conn_error", False),
    ("killed_after_role", "conn_error", False),
    ("killed_after_content", "conn_error", False),
])
def test_classification(fake, mode, kind, retry_after):
    fake.mode = mode
    load, outcomes = run_load(fake.base, 0.3)
    assert not load.running
    assert len(outcomes) >= 4
    assert {o.kind for o in outcomes} == {kind}, [(o.kind, o.detail) for o in outcomes]
    assert {o.stream for o in outcomes} == {True, False}  # alternates within and across clients
    assert all(o.retry_after is retry_after for o in outcomes)
    assert all(o.end_mono >= o.start_mono and o.end_wall >= o.start_wall for o in outcomes)
    if kind == "good":
        assert all(o.status == 200 and o.completion_tokens == 1 for o in outcomes)
    if kind == "bad":
        assert all(o.detail for o in outcomes)
    if mode == "reset":
        assert all(o.status is None for o in outcomes)
    if mode.startswith("killed"):
        # not an empty 200: the body never ended as HTTP says it ends (no last chunk, short of content-length)
        assert all(o.status == 200 and "the connection ended mid-body" in o.detail for o in outcomes), \
            [o.detail for o in outcomes]
    s = loadgen.summarize(outcomes, outcomes[0].start_wall)
    assert s["sent"] == len(outcomes) and s[kind] == len(outcomes)


def test_requests_are_chat_completions_alternating_stream(fake):
    _unused, outcomes = run_load(fake.base, 0.3)
    seen = list(fake.seen)
    assert len(seen) == len(outcomes)
    for body in seen:
        assert body["model"] == MODEL and body["messages"][0]["role"] == "user" and body["max_tokens"] == 8
        if body["stream"]:
            assert body["stream_options"] == {"include_usage": True}
    prompts = [b["messages"][0]["content"] for b in seen]
    assert len(set(prompts)) == len(prompts)  # a counter in each prompt


def test_the_client_key_is_sent_as_a_bearer_token(fake, monkeypatch):
    monkeypatch.delenv("A3_PROXY_API_KEY", raising=False)
    run_load(fake.base, 0.2, api_key="k-123")
    assert fake.auth and set(fake.auth) == {"Bearer k-123"}
    fake.auth.clear()
    monkeypatch.setenv("A3_PROXY_API_KEY", "from-env")
    run_load(fake.base, 0.2)
    assert fake.auth and set(fake.auth) == {"Bearer from-env"}
    fake.auth.clear()
    monkeypatch.setenv("A3_PROXY_API_KEY", "")
    run_load(fake.base, 0.2)
    assert fake.auth and set(fake.auth) == {None}


def test_timeout_is_a_hang(fake):
    fake.mode, fake.slow_s = "slow", 1.5
    t0 = time.monotonic()
    load, outcomes = run_load(fake.base, 0.2, timeout=0.5)
    assert time.monotonic() - t0 < 1.5  # stop() waited for at most one request timeout
    assert len(outcomes) == 2 and {o.kind for o in outcomes} == {"timeout"}
    assert all(0.45 < o.elapsed < 1.2 for o in outcomes)


def test_closed_port_is_conn_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    load, outcomes = run_load(f"http://127.0.0.1:{port}", 0.3, interval=0.1)
    assert outcomes and {o.kind for o in outcomes} == {"conn_error"}
    assert all(o.status is None for o in outcomes)
    assert len(outcomes) <= 2 * 5  # interval keeps a refused port from being hammered


def test_environment_proxies_are_ignored(fake, monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    _unused, outcomes = run_load(fake.base, 0.2)
    assert outcomes and {o.kind for o in outcomes} == {"good"}


@pytest.mark.parametrize("url", ["http://10.0.0.1:8088", "http://example.com:8088", "http://[::1]:8088",
                                 "https://127.0.0.1:8088", "http://128.0.0.1", "ftp://127.0.0.1/"])
def test_refuses_non_loopback_targets(url):
    with pytest.raises(ValueError):
        loadgen.Load(url, MODEL)


def test_accepts_loopback_targets():
    assert loadgen.Load("http://127.30.0.11:8088", MODEL).url == "http://127.30.0.11:8088/v1/chat/completions"
    assert loadgen.Load("http://localhost:8088/", MODEL).url == "http://localhost:8088/v1/chat/completions"
    assert loadgen.Load("http://127.255.0.1", MODEL).url == "http://127.255.0.1/v1/chat/completions"


def test_bounds_end_the_load_by_itself(fake):
    load = loadgen.Load(fake.base, MODEL, clients=2, interval=0, max_requests=5).start()
    assert load.join(5)
    assert len(load.outcomes) == 5
    t0 = time.monotonic()
    load = loadgen.Load(fake.base, MODEL, clients=2, interval=0.05, max_duration=0.3).start()
    assert load.join(5)
    assert 0.25 < time.monotonic() - t0 < 1.5 and load.outcomes


def test_stop_abort_cuts_requests_in_flight(fake):
    fake.mode, fake.slow_s = "slow", 3
    load = loadgen.Load(fake.base, MODEL, clients=2, timeout=10).start()
    time.sleep(0.2)
    t0 = time.monotonic()
    outcomes = load.stop(abort=True)
    assert time.monotonic() - t0 < 1
    assert outcomes == [] and load.aborted == 2


def test_fault_timeline_good_503_good(fake):
    load = loadgen.Load(fake.base, MODEL, clients=2, timeout=2, interval=0.05).start()
    assert load.wait_good(2, timeout=3)
    time.sleep(0.3)
    fake.mode = "503"
    fault_at = time.time()
    time.sleep(0.7)
    fake.mode = "good"
    healed_at = time.time()
    assert load.wait_good(2, timeout=3)
    time.sleep(0.2)
    outcomes = load.stop()
    s = loadgen.summarize(outcomes, fault_at, name="503 for 0.7 s")
    assert s["sent"] == len(outcomes) == s["good"] + s["honest_error"]
    assert s["honest_error"] >= 4 and s["retry_after"] == s["honest_error"]
    assert s["empty_200"] == s["bad"] == s["timeout"] == s["conn_error"] == 0
    heal = healed_at - fault_at
    assert heal - 0.05 <= s["first_good_after"] < heal + 0.5, s
    assert heal - 0.15 <= s["longest_gap"] < heal + 0.5, s
    table = loadgen.format_table([s])
    assert "| 503 for 0.7 s |" in table


# ----------------------------------------------------------------------------- pure summary tests

def oc(kind, start, end, stream=False, retry_after=False, detail=""):
    return loadgen.Outcome(client=0, seq=0, stream=stream, start_wall=start, start_mono=start, end_wall=end,
                           end_mono=end, status=200, kind=kind, retry_after=retry_after, detail=detail)


def test_summarize_counts_first_good_and_gap():
    outcomes = [oc("good", 100.0, 100.5), oc("good", 101.0, 101.2),
                oc("honest_error", 102.0, 102.1, retry_after=True), oc("honest_error", 102.5, 102.6),
                oc("timeout", 101.9, 104.0, detail="no complete answer"),
                oc("good", 101.95, 105.5),            # started before the fault: not "after" it
                oc("conn_error", 103.0, 103.0), oc("empty_200", 103.5, 103.6), oc("bad", 103.7, 103.8, detail="x"),
                oc("good", 106.0, 106.4), oc("good", 106.1, 106.3)]
    s = loadgen.summarize(outcomes, 102.0, name="decode down")
    assert s["fault"] == "decode down" and s["fault_at"] == 102.0
    assert s["sent"] == 11
    assert (s["good"], s["honest_error"], s["empty_200"], s["conn_error"], s["timeout"], s["bad"]) == (5, 2, 1, 1, 1, 1)
    assert s["retry_after"] == 1
    assert s["first_good_after"] == pytest.approx(4.3)      # 106.3, the earliest-ending good that started >= 102
    assert s["longest_gap"] == pytest.approx(105.5 - 101.2)
    assert "timeout: no complete answer" in s["details"] and "bad: x" in s["details"]
    # dicts (as read back from JSON lines) work the same
    assert loadgen.summarize([o.as_dict() for o in outcomes], 102.0, name="decode down") == s
    # a window
    w = loadgen.summarize(outcomes, 102.0, start=102.0, end=104.0)
    assert w["sent"] == 5 and w["good"] == 0 and w["first_good_after"] is None


def test_summarize_edge_cases():
    s = loadgen.summarize([], 10.0)
    assert s["sent"] == 0 and s["first_good_after"] is None and s["longest_gap"] is None
    s = loadgen.summarize([oc("timeout", 10.0, 40.0), oc("conn_error", 41.0, 41.0)], 5.0)
    assert s["first_good_after"] is None and s["longest_gap"] == pytest.approx(31.0)


def test_format_table():
    rows = [loadgen.summarize([oc("good", 1.0, 1.5), oc("honest_error", 2.0, 2.1, retry_after=True),
                               oc("good", 3.0, 3.25)], 2.0, name="proxy restart"),
            loadgen.summarize([oc("timeout", 1.0, 31.0)], 1.0, name="engine | hang")]
    table = loadgen.format_table(rows)
    lines = table.splitlines()
    assert len(lines) == 4 and table.endswith("\n")
    assert lines[0] == ("| fault | sent | good | honest errors | with Retry-After | empty 200 | conn errors | "
                        "timeouts | bad | first good after fault (s) | longest gap without good (s) |")
    assert lines[1].startswith("|---|---:|")
    assert lines[2] == "| proxy restart | 3 | 2 | 1 | 1 | 0 | 0 | 0 | 0 | 1.2 | 1.8 |"
    assert lines[3] == "| engine \\| hang | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | never | 30.0 |"
    assert all(ln.replace("\\|", "").count("|") == lines[0].count("|") for ln in lines[2:])
