"""Live tests of the honest proxy wrapper (roles/proxy/files/a3_proxy.py) around the REAL upstream
load_balance_proxy_server_example.py of vllm-ascend 0.18.0, with simulated engines (sim/engine) and
tiny fake backends as its prefill and decode servers.

Run with the engine venv, like tests/sim/test_engine.py:
  VLLM_ASCEND_SRC=.cache/vllm-ascend-src .cache/engine-venv/bin/python -m pytest -q tests/sim/test_honest_proxy.py

Every process binds an address in 127.41.0.0/24, which a session fixture adds to `lo` as /32 (and
removes afterwards); nothing else is contacted. The wrapper and the upstream script are copied next to
each other into a temporary directory, as the role copies them into the work directory. Waits are
bounded; every process a test starts is stopped in its teardown.
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from simnet import clean_env, free_port, free_range, loopback_addresses

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "sim" / "engine" / "bin" / "vllm"
WRAPPER = REPO / "roles" / "proxy" / "files" / "a3_proxy.py"
PROXY_REL = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"

P0, D0, D1, PROXY_IP, FAKE = (f"127.41.0.{i}" for i in (11, 13, 14, 15, 16))
TEST_IPS = [P0, D0, D1, PROXY_IP, FAKE]
# Fast settings for the tests: a backend leaves the rotation after 2 failed probes 0.5 s apart.
FAST = ["--a3-probe-interval", "0.5", "--a3-probe-timeout", "0.5", "--a3-fail-threshold", "2",
        "--a3-retry-after", "7", "--a3-first-byte-timeout", "2"]
DETECT_S = 2 * 0.5 + 0.5 + 2.5  # threshold x interval + probe timeout + slack (the machine may be busy)
FIRST_BYTE_S = 2 + 2.0  # --a3-first-byte-timeout + slack

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _find_vas_src():
    for cand in (os.environ.get("VLLM_ASCEND_SRC"), "/vllm-workspace/vllm-ascend"):
        if cand and (Path(cand) / PROXY_REL).is_file():
            return Path(cand)
    return None


def _deps_ok():
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


VAS_SRC = _find_vas_src()
pytestmark = pytest.mark.skipif(
    VAS_SRC is None or not _deps_ok(),
    reason="needs the vllm-ascend 0.18.0 source tree (VLLM_ASCEND_SRC) and fastapi<0.124, httpx, uvicorn "
           "in this interpreter (.cache/engine-venv)")


# ----------------------------------------------------------------------------- helpers

def http(method, url, body=None, timeout=15):
    """(status, headers, body bytes); never raises for an HTTP status. A bytes body is sent as it is."""
    data, hdrs = None, {}
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs["content-type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with _opener.open(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def mooncake_cfg(role, kv_port):
    conn = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(kv_port),
            "kv_connector_extra_config": {"prefill": {"dp_size": 1, "tp_size": 2},
                                          "decode": {"dp_size": 1, "tp_size": 2}}}
    cfg = {"kv_connector": "MultiConnector", "kv_role": role,
           "kv_connector_extra_config": {"connectors": [conn]}}
    if role == "kv_producer":
        cfg["engine_id"] = "0"
    return json.dumps(cfg)


class Proc:
    def __init__(self, argv, env, cwd, name):
        self.name = name
        self.log = Path(cwd) / f"{name}.log"
        self._out = open(self.log, "ab")
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=self._out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self):
        return self.log.read_text(errors="replace")

    def stop(self, timeout=10):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(timeout=5)
        self._out.close()
        return self.p.returncode


class Engine(Proc):
    """A simulated vLLM engine (sim/engine/bin/vllm) on one loopback address."""

    def __init__(self, tmp, name, host, port, role):
        self.host, self.port, self.base = host, port, f"http://{host}:{port}"
        argv = [str(SHIM), "serve", str(tmp / "model"), "--host", host, "--port", str(port),
                "--tensor-parallel-size", "2", "--served-model-name", "glm-5.1", "--max-model-len", "202752",
                "--trust-remote-code", "--kv-transfer-config", mooncake_cfg(role, free_range(host, 2))]
        env = clean_env(A3SIM_DEV_DIR=tmp / "dev", A3SIM_HCCN_CONF=tmp / "hccn.conf",
                        VLLM_RPC_BASE_PATH=tmp / "rpc", VLLM_SIM_PYTHON=sys.executable, VLLM_ASCEND_SRC=VAS_SRC,
                        PYTHONHASHSEED=0, ASCEND_RT_VISIBLE_DEVICES="0,1", A3SIM_DP_TIMEOUT_S=15,
                        A3SIM_US_PER_OUTPUT_TOKEN=200, HCCL_IF_IP=host, HCCL_SOCKET_IFNAME="lo",
                        GLOO_SOCKET_IFNAME="lo", TP_SOCKET_IFNAME="lo")
        super().__init__(argv, env, tmp, name)

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.p.poll() is None, f"{self.name} exited:\n{self.output()[-3000:]}"
            try:
                if http("GET", self.base + "/health", timeout=1)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.output()[-3000:]}")


class Wrapper(Proc):
    """a3_proxy.py next to a copy of the upstream script, as the role lays them out."""

    def __init__(self, tmp, name, prefills, decodes, extra=()):
        work = tmp / f"work-{name}"
        work.mkdir()
        shutil.copy(WRAPPER, work / "a3_proxy.py")
        shutil.copy(VAS_SRC / PROXY_REL, work / "load_balance_proxy_server_example.py")
        self.port = free_port(PROXY_IP)
        self.base = f"http://{PROXY_IP}:{self.port}"
        argv = [sys.executable, "a3_proxy.py", "--port", str(self.port), "--host", PROXY_IP,
                "--prefiller-hosts", *[h for h, _unused in prefills], "--prefiller-ports", *[str(p) for _unused, p in prefills],
                "--decoder-hosts", *[h for h, _unused in decodes], "--decoder-ports", *[str(p) for _unused, p in decodes],
                *FAST, *extra]
        super().__init__(argv, clean_env(), work, name)

    def wait_listening(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.p.poll() is None, f"wrapper exited:\n{self.output()}"
            try:
                http("GET", self.base + "/a3/backends", timeout=1)
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"wrapper not listening within {timeout}s:\n{self.output()}")

    def wait_health(self, want, timeout):
        """Poll /healthcheck until it gives `want`; returns (seconds waited, body)."""
        start = time.monotonic()
        last = None
        while time.monotonic() - start < timeout:
            status, _unused, body = http("GET", self.base + "/healthcheck", timeout=2)
            last = (status, body)
            if status == want:
                return time.monotonic() - start, json.loads(body)
            time.sleep(0.1)
        raise AssertionError(f"/healthcheck not {want} within {timeout}s (last {last}):\n{self.output()[-3000:]}")

    def backends(self):
        status, _unused, body = http("GET", self.base + "/a3/backends")
        assert status == 200
        return {(b["role"], b["backend"]): b for b in json.loads(body)}

    def metrics(self):
        status, _unused, body = http("GET", self.base + "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


CHAT = {"model": "glm-5.1", "messages": [{"role": "user", "content": "hello honest proxy"}], "max_tokens": 8}


def assert_json_error(status, headers, body, codes=(502, 503)):
    assert status in codes, (status, body)
    assert body, "an error must have a body"
    err = json.loads(body)["error"]
    assert err["code"] == status and err["message"] and err["type"]
    if status == 503:
        assert headers.get("retry-after") == "7", headers
    return err


def sse_events(body):
    return [ln[6:] for ln in body.decode().split("\n") if ln.startswith("data: ")]


# ----------------------------------------------------------------------------- fake backends

class FakeBackend:
    """A tiny HTTP backend in this process: GET /health and /v1/models answer 200; POST behaves by mode:
    hang (accept, never answer; notes when the client closes), cut (stream one chunk, then drop the
    connection), nodone (stream one chunk and end cleanly without [DONE]), nousage (a non-stream
    answer with choices but without usage), error500 (a JSON 500 error)."""

    def __init__(self, host, mode):
        self.mode = mode
        self.hung = 0
        self.closed_by_client = 0
        self.stop_event = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": []} if "models" in self.path else {})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                getattr(self, "_" + fake.mode)()

            def _hang(self):
                fake.hung += 1
                while not fake.stop_event.is_set():
                    readable, _unused, _unused = select.select([self.connection], [], [], 0.1)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        fake.closed_by_client += 1
                        break
                self.close_connection = True

            def _stream_one(self):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                ev = {"id": "cmpl-fake", "object": "chat.completion.chunk", "model": "glm-5.1",
                      "choices": [{"index": 0, "delta": {"content": "partial"}, "finish_reason": None}]}
                data = b"data: " + json.dumps(ev).encode() + b"\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _cut(self):
                self._stream_one()
                time.sleep(0.1)
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

            def _nodone(self):
                self._stream_one()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _error500(self):
                self._send(500, {"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}})

            def _nousage(self):
                self._send(200, {"id": "x", "object": "chat.completion", "model": "glm-5.1",
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                              "finish_reason": "stop"}]})

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.host, self.port = host, self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def hosts():
    """Add the test IPs to lo as /32 (like sim/up does); remove them afterwards."""
    yield from loopback_addresses(TEST_IPS)


def _node_dir(tmp):
    (tmp / "model").mkdir()
    (tmp / "model" / "config.json").write_text(json.dumps(
        {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "max_position_embeddings": 202752}))
    (tmp / "dev").mkdir()
    for i in range(16):
        (tmp / "dev" / f"davinci{i}").touch()
    (tmp / "hccn.conf").write_text("address_0=127.31.0.1\nnetmask_0=255.255.255.0\n")
    (tmp / "rpc").mkdir()
    return tmp


@pytest.fixture(scope="module")
def pair(hosts, tmp_path_factory):
    """One prefill and one decode engine shared by the tests that do not stop them."""
    tmp = _node_dir(tmp_path_factory.mktemp("pair"))
    engines = [Engine(tmp, "prefill", P0, free_port(P0), "kv_producer"),
               Engine(tmp, "decode", D0, free_port(D0), "kv_consumer")]
    try:
        for e in engines:
            e.wait_ready()
        yield tuple(engines)
    finally:
        for e in reversed(engines):
            e.stop()


@pytest.fixture
def procs(tmp_path, hosts):
    """Start wrappers, engines and fake backends for one test; everything is stopped afterwards."""
    _node_dir(tmp_path)

    class Procs:
        started = []

        def wrapper(self, prefills, decodes, extra=()):
            w = Wrapper(tmp_path, f"wrapper{len(self.started)}", prefills, decodes, extra)
            self.started.append(w)
            return w.wait_listening()

        def engine(self, name, host, port, role):
            e = Engine(tmp_path, name, host, port, role)
            self.started.append(e)
            return e

        def fake(self, mode, host=FAKE):
            f = FakeBackend(host, mode)
            self.started.append(f)
            return f

    p = Procs()
    yield p
    for item in reversed(p.started):
        item.stop()


def addr(x):
    return (x.host, x.port)


# ----------------------------------------------------------------------------- tests

def test_pd_pair_answers_through_the_wrapper(procs, pair):
    pre, dec = pair
    w = procs.wrapper([addr(pre)], [addr(dec)])
    _unused, health = w.wait_health(200, 10)
    assert health["healthy_prefill"] == 1 and health["healthy_decode"] == 1
    assert health["prefill_instances"] == 1 and health["decode_instances"] == 1
    status, _unused, body = http("POST", w.base + "/v1/chat/completions",
                                 {"model": "glm-5.1", "messages": [{"role": "user", "content": "你好 honest proxy"}],
                                  "max_tokens": 32, "temperature": 0})
    assert status == 200, body
    resp = json.loads(body)
    assert resp["choices"][0]["message"]["content"] and resp["usage"]["completion_tokens"] > 0
    status, headers, body = http("POST", w.base + "/v1/completions",
                                 {"model": "glm-5.1", "prompt": "stream through the wrapper", "max_tokens": 5,
                                  "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(x) for x in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert not any("error" in c for c in chunks)
    # a few clients at once, streams and not: every one gets its own full answer
    results = {}

    def client(i):
        results[i] = http("POST", w.base + "/v1/completions",
                          {"model": "glm-5.1", "prompt": f"c{i}x", "max_tokens": 16, "stream": i % 2 == 1})

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == list(range(6))
    for i, (status, _unused, body) in results.items():
        assert status == 200, body
        if i % 2:
            events = sse_events(body)
            assert events[-1] == "[DONE]"
            text = "".join(c["choices"][0]["text"] for c in map(json.loads, events[:-1]) if c["choices"])
        else:
            text = json.loads(body)["choices"][0]["text"]
        assert f"c{i}x" in text, (i, text)
    backs = w.backends()
    assert set(backs) == {("prefill", f"{P0}:{pre.port}"), ("decode", f"{D0}:{dec.port}")}
    for b in backs.values():
        assert b["in_rotation"] and b["healthy"] and b["last_probe_ok"] and b["consecutive_failures"] == 0
        assert b["last_probe_time"] and b["last_change_time"] and b["last_change_reason"]
    m = w.metrics()
    assert m['a3_proxy_requests_total{endpoint="/v1/chat/completions",code="200"}'] == 1
    assert m['a3_proxy_requests_total{endpoint="/v1/completions",code="200"}'] == 7
    assert m[f'a3_proxy_backend_up{{role="decode",backend="{D0}:{dec.port}"}}'] == 1


def test_decode_down_then_back(procs, pair):
    pre, _unused = pair
    port = free_port(D1)
    dec = procs.engine("decode-b", D1, port, "kv_consumer").wait_ready()
    w = procs.wrapper([addr(pre)], [(D1, port)])
    w.wait_health(200, 10)
    key = ("decode", f"{D1}:{port}")
    assert dec.stop() == 0
    # before the probes notice: the upstream's empty 200 becomes a 502 JSON error naming the decode
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    err = assert_json_error(status, headers, body)
    assert status == 503 or f"decode backend {D1}:{port}" in err["message"], err
    waited, health = w.wait_health(503, DETECT_S + 2)
    assert waited <= DETECT_S, waited
    assert health["missing"] == ["decode"] and health["healthy_decode"] == 0 and health["healthy_prefill"] == 1
    assert f"{D1}:{port}" in health["message"]
    status, headers, _unused = http("GET", w.base + "/healthcheck")
    assert status == 503 and headers.get("retry-after") == "7"
    back = w.backends()[key]
    assert not back["in_rotation"] and back["state"] == "down" and back["consecutive_failures"] >= 2
    assert "consecutive failed /health probes" in back["last_change_reason"]
    # out of rotation: refused at once, with Retry-After
    t0 = time.monotonic()
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    assert time.monotonic() - t0 < 2.0  # no waiting on any backend
    err = assert_json_error(status, headers, body, codes=(503,))
    assert "decode" in err["message"]
    m = w.metrics()
    assert m[f'a3_proxy_backend_up{{role="decode",backend="{D1}:{port}"}}'] == 0
    assert m['a3_proxy_requests_total{endpoint="/v1/chat/completions",code="503"}'] >= 1
    assert m["a3_proxy_empty_200_blocked_total"] + m["a3_proxy_upstream_errors_total"] >= 1
    assert "taken out of the rotation" in w.output()
    # the decode comes back on the same address: back in rotation, real answers again
    procs.engine("decode-b2", D1, port, "kv_consumer").wait_ready()
    w.wait_health(200, DETECT_S + 2)
    back = w.backends()[key]
    assert back["in_rotation"] and back["state"] == "up" and "answers again" in back["last_change_reason"]
    status, _unused, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"]
    assert w.metrics()[f'a3_proxy_backend_up{{role="decode",backend="{D1}:{port}"}}'] == 1
    assert "back in the rotation" in w.output()


def test_hung_prefill_gives_503_within_first_byte_timeout(procs, pair):
    _unused, dec = pair
    hung = procs.fake("hang")
    w = procs.wrapper([addr(hung)], [addr(dec)])
    w.wait_health(200, 10)  # /health of the hung backend answers: only completions hang
    t0 = time.monotonic()
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    elapsed = time.monotonic() - t0
    err = assert_json_error(status, headers, body, codes=(503,))
    assert 1.9 <= elapsed <= FIRST_BYTE_S, elapsed
    assert "first-byte timeout" in err["message"]
    assert f"waiting on prefill backend {FAKE}:{hung.port}" in err["message"]
    back = w.backends()[("prefill", f"{FAKE}:{hung.port}")]
    assert back["request_failures"] == 1 and "no first byte" in back["last_request_failure"]
    assert back["in_rotation"]  # a suspect only: the probes decide the rotation
    assert w.metrics()[f'a3_proxy_backend_request_failures_total{{role="prefill",backend="{FAKE}:{hung.port}"}}'] == 1
    # the upstream request to the hung backend was cancelled (its connection closed)
    deadline = time.monotonic() + 5
    while hung.closed_by_client < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.hung >= 1 and hung.closed_by_client >= 1
    assert w.metrics()["a3_proxy_first_byte_timeouts_total"] == 1
    # the upstream counted the request as finished: a backend that now fails leaves the rotation at once
    # (while the upstream counts a request in flight, it only marks a backend for removal)
    hung.stop()
    _unused, health = w.wait_health(503, DETECT_S)
    assert health["missing"] == ["prefill"]
    assert "Remove prefiller instances" in w.output() and "Start to taint" not in w.output()


def test_hung_decode_stream_gives_503(procs, pair):
    pre, _unused = pair
    hung = procs.fake("hang")
    w = procs.wrapper([addr(pre)], [addr(hung)])
    w.wait_health(200, 10)
    t0 = time.monotonic()
    status, headers, body = http("POST", w.base + "/v1/chat/completions", dict(CHAT, stream=True))
    elapsed = time.monotonic() - t0
    err = assert_json_error(status, headers, body, codes=(503,))
    assert elapsed <= FIRST_BYTE_S, elapsed
    assert f"waiting on decode backend {FAKE}:{hung.port}" in err["message"]
    deadline = time.monotonic() + 5
    while hung.closed_by_client < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.closed_by_client >= 1, "the upstream stream to the hung decode was not cancelled"


def test_inflight_requests_count_an_open_request_and_return_to_zero_when_the_upstream_count_does_not(procs, pair):
    """What a rolling restart waits on: the wrapper's count of open requests per backend. A stream cut short
    (here by the first-byte timeout on a hung decode) never reaches the upstream's release, so its own count
    stays above zero; the wrapper's count goes back to 0 when the client's request ends."""
    pre, _unused = pair
    hung = procs.fake("hang")
    w = procs.wrapper([addr(pre)], [addr(hung)])
    w.wait_health(200, 10)
    keys = {("prefill", f"{pre.host}:{pre.port}"), ("decode", f"{FAKE}:{hung.port}")}
    answer = {}
    client = threading.Thread(target=lambda: answer.update(r=http("POST", w.base + "/v1/chat/completions",
                                                                  dict(CHAT, stream=True))))
    client.start()
    try:
        deadline, seen = time.monotonic() + FIRST_BYTE_S, {}
        while time.monotonic() < deadline and not all(seen.get(k, {}).get("inflight_requests") == 1 for k in keys):
            seen = w.backends()
            time.sleep(0.1)
        assert all(seen[k]["inflight_requests"] == 1 for k in keys), seen  # the request is open on both
    finally:
        client.join(timeout=FIRST_BYTE_S + 10)
    assert answer["r"][0] == 503, answer
    # the wrapper answers first, then ends the upstream request (a disconnect, at most 3 s to unwind, then a cancel):
    # the request counts until that is done
    deadline = time.monotonic() + 3 + 1 + 2
    after = w.backends()
    while time.monotonic() < deadline and not all(after[k]["inflight_requests"] == 0 for k in keys):
        time.sleep(0.2)
        after = w.backends()
    assert all(after[k]["inflight_requests"] == 0 for k in keys), after
    # the upstream's own count of the cut stream is never released (v0.18.0): why it is not what the roll waits on
    assert after[("decode", f"{FAKE}:{hung.port}")]["outstanding_load"] >= 1, after


@pytest.mark.parametrize("mode", ["cut", "nodone"])
def test_stream_cut_midway_ends_with_error_event_and_done(procs, pair, mode):
    pre, _unused = pair
    fake = procs.fake(mode)
    w = procs.wrapper([addr(pre)], [addr(fake)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/chat/completions", dict(CHAT, stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]", body
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "partial"
    # the upstream retries a cut decode stream from the start: the repeated text must not reach the client
    assert len(events) == 3, events
    err = json.loads(events[-2])["error"]
    assert err["code"] == 502 and "cut" in err["message"] and f"decode backend {FAKE}:{fake.port}" in err["message"]
    assert w.metrics()["a3_proxy_stream_interrupted_total"] == 1


def test_answer_without_usage_is_502_not_empty_200(procs, pair):
    """The upstream turns a decode answer without usage.completion_tokens into an empty 200."""
    pre, _unused = pair
    fake = procs.fake("nousage")
    w = procs.wrapper([addr(pre)], [addr(fake)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    err = assert_json_error(status, headers, body, codes=(502,))
    assert "empty body" in err["message"] and f"decode backend {FAKE}:{fake.port}" in err["message"]
    m = w.metrics()
    assert m["a3_proxy_empty_200_blocked_total"] == 1
    assert m['a3_proxy_requests_total{endpoint="/v1/chat/completions",code="502"}'] == 1


def test_failing_prefill_gives_502_naming_it(procs, pair):
    """The upstream answers a text 500 when the prefill fails: the client gets a JSON 502 with the cause."""
    _unused, dec = pair
    fake = procs.fake("error500")
    w = procs.wrapper([addr(fake)], [addr(dec)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/completions", {"model": "glm-5.1", "prompt": "x"})
    err = assert_json_error(status, headers, body, codes=(502,))
    assert "HTTP 500" in err["message"] and f"{FAKE}:{fake.port}" in err["message"]
    assert w.metrics()["a3_proxy_upstream_errors_total"] == 1


def test_backend_4xx_json_error_is_kept(procs, pair):
    pre, dec = pair
    w = procs.wrapper([addr(pre)], [addr(dec)])
    w.wait_health(200, 10)
    status, _unused, body = http("POST", w.base + "/v1/chat/completions", dict(CHAT, model="no-such-model"))
    assert status == 404, body
    assert "no-such-model" in json.loads(body)["error"]["message"]
    status, _unused, body = http("POST", w.base + "/v1/completions", b"not json")
    assert status == 400 and json.loads(body)["error"]["code"] == 400


def test_no_backend_up_at_start(procs):
    dead = [(P0, free_port(P0))], [(D0, free_port(D0))]
    w = procs.wrapper(*dead)
    waited, health = w.wait_health(503, 5)
    status, headers, body = http("POST", w.base + "/v1/completions", {"model": "glm-5.1", "prompt": "x"})
    assert_json_error(status, headers, body, codes=(503,))
    deadline = time.monotonic() + DETECT_S
    while time.monotonic() < deadline and any(b["in_rotation"] for b in w.backends().values()):
        time.sleep(0.1)
    assert not any(b["in_rotation"] for b in w.backends().values())
    _unused, health = w.wait_health(503, 1)
    assert health["missing"] == ["prefill", "decode"]


def test_command_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(WRAPPER, work / "a3_proxy.py")
    shutil.copy(VAS_SRC / PROXY_REL, work / "load_balance_proxy_server_example.py")

    def run(*args):
        return subprocess.run([sys.executable, "a3_proxy.py", *args], cwd=work, env=clean_env(),
                              capture_output=True, text=True, timeout=60, check=False)

    r = run("--port", "1", "--bogus", "x")
    assert r.returncode == 2 and "unrecognized arguments: --bogus x" in r.stderr
    r = run("--a3-probe-interval", "0")
    assert r.returncode == 2 and "--a3-probe-interval" in r.stderr and "greater than 0" in r.stderr
    r = run("--a3-probe", "1")
    assert r.returncode == 2 and "--a3-probe" in r.stderr
    r = run("--prefiller-hosts", "a", "b", "--prefiller-ports", "1")
    assert r.returncode == 2 and "Number of prefiller hosts must match" in r.stderr
    r = run("--help")
    assert r.returncode == 0 and "--a3-first-byte-timeout" in r.stdout and "--prefiller-hosts" in r.stdout


def test_drain_keeps_new_requests_off_a_backend_through_its_restart(procs, pair):
    pre, dec = pair
    port = free_port(D1)
    other = procs.engine("decode-drain", D1, port, "kv_consumer").wait_ready()
    # listed first: the upstream picks the lowest (load, index), so sequential requests would all go to it
    w = procs.wrapper([addr(pre)], [(D1, port), addr(dec)])
    w.wait_health(200, 10)
    key, drained_key = f"{D1}:{port}", ("decode", f"{D1}:{port}")
    # what a rolling restart does: drain, wait until idle, stop, start, undrain
    status, _unused, body = http("POST", w.base + "/a3/drain", {"backends": [key]})
    assert status == 200, body
    answer = json.loads(body)
    assert answer["drained"] == [key] and answer["changed"] == [key]
    assert answer["backends"][0]["drained"] and answer["backends"][0]["outstanding_load"] < 1
    assert other.stop() == 0
    # before the probes notice the stop: without the drain these would all go to the stopped decode
    for i in range(8):
        status, _unused, body = http("POST", w.base + "/v1/completions",
                                     {"model": "glm-5.1", "prompt": f"dr{i}", "max_tokens": 16})
        assert status == 200 and f"dr{i}" in json.loads(body)["choices"][0]["text"], body
    w.wait_health(200, 1)
    procs.engine("decode-drain2", D1, port, "kv_consumer").wait_ready()
    deadline = time.monotonic() + DETECT_S + 5
    while w.backends()[drained_key]["state"] != "up" and time.monotonic() < deadline:
        time.sleep(0.3)
    back = w.backends()[drained_key]
    assert back["state"] == "up" and back["healthy"] and back["drained"]  # the prober did not undo the drain
    assert w.metrics()[f'a3_proxy_backend_drained{{role="decode",backend="{key}"}}'] == 1
    assert w.metrics()[f'a3_proxy_backend_up{{role="decode",backend="{key}"}}'] == 0
    # every decode drained: clients get 503 saying so, at once
    status, _unused, body = http("POST", w.base + "/a3/drain", {"backends": [f"{D0}:{dec.port}"]})
    assert status == 200 and json.loads(body)["drained"] == sorted([key, f"{D0}:{dec.port}"])
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    err = assert_json_error(status, headers, body, codes=(503,))
    assert "drained for maintenance" in err["message"]
    status, _unused, body = http("POST", w.base + "/a3/undrain", {"backends": [key, f"{D0}:{dec.port}"]})
    assert status == 200 and json.loads(body)["drained"] == []
    for i in range(4):
        status, _unused, body = http("POST", w.base + "/v1/chat/completions", CHAT)
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"], body
    assert all(b["outstanding_load"] < 1 and not b["drained"] for b in w.backends().values())
    # what the endpoints refuse
    status, _unused, body = http("POST", w.base + "/a3/drain", {"backends": ["127.0.0.1:1"]})
    assert status == 400 and "unknown backend 127.0.0.1:1" in json.loads(body)["error"]["message"]
    assert http("GET", w.base + "/a3/drain")[0] == 405
    assert "drained for maintenance (kept out of the selection)" in w.output()


def test_drain_holds_after_the_upstream_removed_and_added_backends(procs, pair):
    """The upstream's heap stops matching its list positions once backends left and came back under load
    (a removal waits for a moment without requests, in another thread): the drain must hold all the same."""
    pre, _unused = pair
    ports = [free_port(D1), free_port(D1)]
    names = [f"{D1}:{p}" for p in ports]
    engines = [procs.engine(f"decode-cycle{i}", D1, p, "kv_consumer").wait_ready() for i, p in enumerate(ports)]
    w = procs.wrapper([addr(pre)], [(D1, p) for p in ports])
    w.wait_health(200, 10)
    stop, answers = threading.Event(), []

    def client(i):
        while not stop.is_set():
            answers.append(http("POST", w.base + "/v1/completions",
                                {"model": "glm-5.1", "prompt": f"cy{i}", "max_tokens": 16}, timeout=30)[0])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        for i in (0, 1, 0):  # each decode leaves (its probes fail) and comes back, under load
            assert engines[i].stop() == 0
            deadline = time.monotonic() + DETECT_S + 5
            while w.backends()[("decode", names[i])]["state"] != "down" and time.monotonic() < deadline:
                time.sleep(0.2)
            engines[i] = procs.engine(f"decode-cycle{i}-again", D1, ports[i], "kv_consumer").wait_ready()
            deadline = time.monotonic() + DETECT_S + 5
            while not w.backends()[("decode", names[i])]["in_rotation"] and time.monotonic() < deadline:
                time.sleep(0.2)
        # drain each in turn and stop it: nothing may go to it while it is down
        for i in (0, 1):
            assert http("POST", w.base + "/a3/drain", {"backends": [names[i]]})[0] == 200
            time.sleep(1.0)  # requests selected before the drain finish
            answers.clear()
            assert engines[i].stop() == 0
            time.sleep(1.5)  # before the probes notice (fail threshold 2 x 0.5 s)
            bad = [s for s in list(answers) if s != 200]
            assert not bad and len(answers) >= 3, (names[i], answers)
            engines[i] = procs.engine(f"decode-cycle{i}-back", D1, ports[i], "kv_consumer").wait_ready()
            assert http("POST", w.base + "/a3/undrain", {"backends": [names[i]]})[0] == 200
            deadline = time.monotonic() + DETECT_S + 5
            while not all(b["in_rotation"] and b["healthy"] for b in w.backends().values()) and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
