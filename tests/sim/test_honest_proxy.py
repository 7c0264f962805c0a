"""Live tests of the honest proxy wrapper (roles/proxy/files/a3_proxy.py and its package a3proxy/) around the
REAL upstream load_balance_proxy_server_example.py of vllm-ascend 0.18.0.

Run with the engine venv, like tests/sim/test_engine.py:
  VLLM_ASCEND_SRC=.cache/vllm-ascend-src .cache/engine-venv/bin/python -m pytest -q tests/sim/test_honest_proxy.py

Two kinds of backends:
* simulated engines (sim/engine) and stub engines with one fixed mode on addresses in 127.41.0.0/24, which a
  session fixture adds to `lo` as /32 (and removes afterwards): rotation, drain, timeouts and cut streams with
  real engines;
* stub engines in this process on 127.0.0.1 (StubEngine of tests/unit/proxy/stub_engine.py, the stub the fast
  suite's live tests use too: GET /health, GET /v1/models, POST completions whose behaviour the prompt picks,
  every call recorded with its headers): the listeners, keys and tokens, limits, idle timeouts, a backend's 4xx,
  the load counters, the addresses in client bodies, etcd over TLS. These need no address on lo and no simulated
  engine.

Nothing outside 127.0.0.0/8 is contacted. The wrapper, its package and the upstream script are copied next to
each other into a temporary directory, as the role lays them out in the work directory. Waits are bounded;
every process a test starts is stopped in its teardown.
"""

import http.client as httpclient
import importlib.util
import json
import os
import re
import select
import shutil
import socket
import ssl
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
# the stub engine and the wrapper's process: tests/unit/proxy/stub_engine.py and wrapper_process.py, which the fast
# suite's live tests use too
HELPERS = str(REPO / "tests" / "unit" / "proxy")
if HELPERS not in sys.path:
    sys.path.append(HELPERS)
# pylint: disable=wrong-import-position
from stub_engine import LOCAL, StubEngine, prompt, send_json, sse_events, tag_of  # noqa: E402
from wrapper_process import Process, lay_out, parse_metrics, wrapper_argv  # noqa: E402
# pylint: enable=wrong-import-position

SHIM = REPO / "sim" / "engine" / "bin" / "vllm"
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


def _missing_deps():
    missing = []
    for name in ("fastapi", "httpx", "uvicorn"):
        try:
            __import__(name)
        except ImportError as exc:
            missing.append("%s (%s)" % (name, exc))
    return missing


# Nothing here skips: run without what it needs, the module fails at once and says what to do. The wrapper's own
# live path (with a stand-in upstream) is in the fast suite: tests/unit/proxy/test_proxy_live.py.
VAS_SRC = _find_vas_src()
_NEEDS = [("the vllm-ascend 0.18.0 source tree with %s (VLLM_ASCEND_SRC)" % PROXY_REL)] if VAS_SRC is None else []
_NEEDS += ["%s in %s" % (m, sys.executable) for m in _missing_deps()]
if _NEEDS:
    pytest.fail("tests/sim/test_honest_proxy.py needs %s. ./test.sh provides them after sim/cluster.sh build: the "
                "engine venv .cache/engine-venv (fastapi<0.124.0, httpx, uvicorn) and the vllm-ascend sdist unpacked "
                "into .cache/vllm-ascend-src; run it as ./test.sh does (VLLM_ASCEND_SRC=.cache/vllm-ascend-src "
                ".cache/engine-venv/bin/python -m pytest tests/sim/test_honest_proxy.py)" % "; ".join(_NEEDS),
                pytrace=False)


# ----------------------------------------------------------------------------- helpers

def http(method, url, body=None, timeout=15, headers=None):
    """(status, headers, body bytes); never raises for an HTTP status. A bytes body is sent as it is."""
    data, hdrs = None, dict(headers or {})
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("content-type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with _opener.open(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def read_until_close(sock, deadline, received=b""):
    """What sock gives until the server closes it (or the deadline)."""
    while time.monotonic() < deadline:
        readable, _unused, _unused = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    return received


def raw_exchange(host, port, parts, pause=0.0, timeout=10.0):
    """Send parts (bytes) over one TCP connection, pause seconds after each, then read until the server
    closes or timeout. Returns (what came back, seconds from the first byte sent until the close). Once the
    server answers (or closes) during a pause, nothing more is sent."""
    sock = socket.create_connection((host, port), timeout=timeout)
    start = time.monotonic()
    try:
        for part in parts:
            try:
                sock.sendall(part)
            except OSError:
                break
            if pause and select.select([sock], [], [], pause)[0]:
                break
        received = read_until_close(sock, start + timeout)
        return received, time.monotonic() - start
    finally:
        sock.close()


def mooncake_cfg(role, kv_port):
    conn = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(kv_port),
            "kv_connector_extra_config": {"prefill": {"dp_size": 1, "tp_size": 2},
                                          "decode": {"dp_size": 1, "tp_size": 2}}}
    cfg = {"kv_connector": "MultiConnector", "kv_role": role,
           "kv_connector_extra_config": {"connectors": [conn]}}
    if role == "kv_producer":
        cfg["engine_id"] = "0"
    return json.dumps(cfg)


class Engine(Process):
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
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.output()[-3000:]}"
            try:
                if http("GET", self.base + "/health", timeout=1)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.output()[-3000:]}")


class Wrapper(Process):
    """a3_proxy.py next to a copy of the upstream script, as the role lays them out. base: the public
    listener; admin: the admin listener."""

    def __init__(self, tmp, name, prefills, decodes, extra=(), host=PROXY_IP, fast=None, secrets=None, env=None):
        work = lay_out(tmp / f"work-{name}", VAS_SRC / PROXY_REL)
        self.host = host
        self.port = free_port(host)
        self.admin_port = free_port(LOCAL)
        self.base = f"http://{host}:{self.port}"
        self.admin = f"http://{LOCAL}:{self.admin_port}"
        argv, self.admin_headers = wrapper_argv(work, self.port, self.admin_port, prefills, decodes, host=host,
                                                options=(*(FAST if fast is None else fast), *extra), secrets=secrets)
        super().__init__(argv, env or clean_env(), work, name)

    def wait_listening(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"wrapper exited:\n{self.output()}"
            try:
                http("GET", self.admin + "/healthcheck", timeout=1)
                http("GET", self.base + "/healthcheck", timeout=1)
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"wrapper not listening within {timeout}s:\n{self.output()}")

    def wait_health(self, want, timeout):
        """Poll the admin listener's /healthcheck until it gives `want`; returns (seconds waited, body)."""
        start = time.monotonic()
        last = None
        while time.monotonic() - start < timeout:
            status, _unused, body = http("GET", self.admin + "/healthcheck", timeout=2)
            last = (status, body)
            if status == want:
                return time.monotonic() - start, json.loads(body)
            time.sleep(0.1)
        raise AssertionError(f"/healthcheck not {want} within {timeout}s (last {last}):\n{self.output()[-3000:]}")

    def backends(self):
        status, _unused, body = http("GET", self.admin + "/a3/backends", headers=self.admin_headers)
        assert status == 200, body
        return {(b["role"], b["backend"]): b for b in json.loads(body)}

    def metrics(self):
        status, _unused, body = http("GET", self.admin + "/metrics", headers=self.admin_headers)
        assert status == 200, body
        return parse_metrics(body.decode())


CHAT = {"model": "glm-5.1", "messages": [{"role": "user", "content": "hello honest proxy"}], "max_tokens": 8}


def assert_json_error(status, headers, body, codes=(502, 503)):
    assert status in codes, (status, body)
    assert body, "an error must have a body"
    err = json.loads(body)["error"]
    assert err["code"] == status and err["message"] and err["type"]
    if status == 503:
        assert headers.get("retry-after") == "7", headers
    return err


def assert_openai_error(status, body, want_status, code=None, etype="invalid_request_error"):
    """An OpenAI-style error: {"error": {"message", "type", "code"}} with the given status (and code)."""
    assert status == want_status, (status, body)
    err = json.loads(body)["error"]
    assert set(err) >= {"message", "type", "code"} and err["message"], err
    assert err["type"] == etype, err
    assert err["code"] == (want_status if code is None else code), err
    return err


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def hosts():
    """Add the test IPs to lo as /32 (like sim/up does); remove them afterwards. Where that cannot be done, the
    tests that need them fail (simnet's skip becomes a failure: no proxy test skips)."""
    try:
        yield from loopback_addresses(TEST_IPS)
    except pytest.skip.Exception as exc:
        pytest.fail("the test addresses %s cannot be added to lo: %s (run as root, as ./test.sh does)"
                    % (", ".join(TEST_IPS), exc.msg), pytrace=False)


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
        def __init__(self):
            self.started = []

        def wrapper(self, prefills, decodes, extra=()):
            w = Wrapper(tmp_path, f"wrapper{len(self.started)}", prefills, decodes, extra)
            self.started.append(w)
            return w.wait_listening()

        def engine(self, name, host, port, role):
            e = Engine(tmp_path, name, host, port, role)
            self.started.append(e)
            return e

        def fake(self, role, mode, host=FAKE):
            """A stub engine whose every completion acts by mode."""
            f = StubEngine(role, host=host, mode=mode)
            self.started.append(f)
            return f

    p = Procs()
    yield p
    for item in reversed(p.started):
        item.stop()


def addr(x):
    return (x.host, x.port)


SECRETS = {"api_keys": ["client-key-AAA111", "client-key-BBB222"], "admin_token": "admin-token-CCC333",
           "backend_api_key": "backend-key-DDD444"}
SECRET_VALUES = list(SECRETS["api_keys"]) + [SECRETS["admin_token"], SECRETS["backend_api_key"]]
CLIENT = {"authorization": "Bearer client-key-BBB222"}
# The edge listeners: small limits, short timeouts; probes only at the start (and when a request failed), so
# a test can tell whether a request made the proxy probe early.
EDGE = ["--a3-probe-interval", "3600", "--a3-probe-timeout", "1", "--a3-fail-threshold", "1", "--a3-retry-after", "7",
        "--a3-first-byte-timeout", "2", "--a3-idle-timeout", "1", "--a3-header-timeout", "1", "--a3-body-timeout", "1",
        "--a3-max-body-bytes", "4096", "--a3-max-inflight", "3"]
IDLE_S = 1 + 1.5  # --a3-idle-timeout + slack


class Edge:
    """A wrapper on 127.0.0.1 in front of a prefill and a decode StubEngine."""

    def __init__(self, tmp, name, secrets=None, key=None, decode_dead=False, extra=()):
        self.prefill = StubEngine("prefill", key)
        self.decode = StubEngine("decode", key)
        decode = (LOCAL, free_port(LOCAL)) if decode_dead else (LOCAL, self.decode.port)
        self.w = Wrapper(tmp, name, [(LOCAL, self.prefill.port)], [decode], extra=tuple(extra), host=LOCAL,
                         fast=EDGE, secrets=secrets)
        self.w.wait_listening()
        self.w.wait_health(503 if decode_dead else 200, 10)
        deadline = time.monotonic() + 10  # every backend probed once (the next round is an hour away)
        while any(b["last_probe_ok"] is None for b in self.w.backends().values()) and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self):
        self.w.stop()
        self.prefill.stop()
        self.decode.stop()

    def post(self, path, body, headers=None, timeout=15):
        """POST through the public listener, with the first client key unless headers say otherwise."""
        return http("POST", self.w.base + path, body, timeout=timeout, headers=CLIENT if headers is None else headers)

    def settled(self, timeout=8.0):
        """/a3/backends once no request is open on any backend (bounded)."""
        deadline = time.monotonic() + timeout
        backs = self.w.backends()
        while time.monotonic() < deadline and any(b["inflight_requests"] for b in backs.values()):
            time.sleep(0.1)
            backs = self.w.backends()
        return backs


# ----------------------------------------------------------------------------- tests

def test_pd_pair_answers_through_the_wrapper(procs, pair):
    pre, dec = pair
    w = procs.wrapper([addr(pre)], [addr(dec)])
    _unused, health = w.wait_health(200, 10)
    assert health["healthy_prefill"] == 1 and health["healthy_decode"] == 1
    assert http("GET", w.base + "/healthcheck")[2] == b'{"status": "ok"}'  # the public one names no backend
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
    assert status == 503 or "the decode backend" in err["message"], err
    assert D1 not in err["message"], err  # the client reads no internal address; the log has it
    waited, health = w.wait_health(503, DETECT_S + 2)
    assert waited <= DETECT_S, waited
    assert health["missing"] == ["decode"] and health["healthy_decode"] == 0 and health["healthy_prefill"] == 1
    assert f"{D1}:{port}" in health["message"]
    status, headers, body = http("GET", w.base + "/healthcheck")
    assert status == 503 and headers.get("retry-after") == "7"
    assert json.loads(body) == {"status": "unavailable", "missing": ["decode"],
                                "message": "no healthy decode backend in rotation; retry later"}
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
    hung = procs.fake("prefill", "hang")
    w = procs.wrapper([addr(hung)], [addr(dec)])
    w.wait_health(200, 10)  # /health of the hung backend answers: only completions hang
    t0 = time.monotonic()
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    elapsed = time.monotonic() - t0
    err = assert_json_error(status, headers, body, codes=(503,))
    assert 1.9 <= elapsed <= FIRST_BYTE_S, elapsed
    assert "first-byte timeout" in err["message"]
    assert "waiting on the prefill backend" in err["message"] and FAKE not in err["message"]
    assert f"waiting on prefill backend {FAKE}:{hung.port}" in w.output()
    back = w.backends()[("prefill", f"{FAKE}:{hung.port}")]
    assert back["request_failures"] == 1 and "no first byte" in back["last_request_failure"]
    assert back["in_rotation"]  # a suspect only: the probes decide the rotation
    assert w.metrics()[f'a3_proxy_backend_request_failures_total{{role="prefill",backend="{FAKE}:{hung.port}"}}'] == 1
    # the upstream request to the hung backend was cancelled (its connection closed)
    deadline = time.monotonic() + 5
    while not hung.closed() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.calls and hung.closed()
    assert w.metrics()["a3_proxy_first_byte_timeouts_total"] == 1
    # the upstream counted the request as finished: a backend that now fails leaves the rotation at once
    # (while the upstream counts a request in flight, it only marks a backend for removal)
    hung.stop()
    _unused, health = w.wait_health(503, DETECT_S)
    assert health["missing"] == ["prefill"]
    assert "Remove prefiller instances" in w.output() and "Start to taint" not in w.output()


def test_hung_decode_stream_gives_503(procs, pair):
    pre, _unused = pair
    hung = procs.fake("decode", "hang")
    w = procs.wrapper([addr(pre)], [addr(hung)])
    w.wait_health(200, 10)
    t0 = time.monotonic()
    status, headers, body = http("POST", w.base + "/v1/chat/completions", dict(CHAT, stream=True))
    elapsed = time.monotonic() - t0
    err = assert_json_error(status, headers, body, codes=(503,))
    assert elapsed <= FIRST_BYTE_S, elapsed
    assert "waiting on the decode backend" in err["message"] and FAKE not in err["message"]
    assert f"waiting on decode backend {FAKE}:{hung.port}" in w.output()
    deadline = time.monotonic() + 5
    while not hung.closed() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.closed(), "the upstream stream to the hung decode was not cancelled"


def test_inflight_requests_and_the_upstream_load_return_to_zero_after_a_cut_request(procs, pair):
    """What a rolling restart waits on: the wrapper's count of open requests per backend. A stream cut short
    (here by the first-byte timeout on a hung decode) never reaches the upstream's own release; the wrapper
    releases what the upstream booked when the client's request ends, so both counts go back to 0."""
    pre, _unused = pair
    hung = procs.fake("decode", "hang")
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
    # the upstream (v0.18.0) never releases the count of a cut stream itself: the wrapper's ledger did
    assert all(after[k]["outstanding_load"] == 0 for k in keys), after
    assert w.metrics()["a3_proxy_load_released_total"] >= 1


@pytest.mark.parametrize("mode", ["cut", "nodone"])
def test_stream_cut_midway_ends_with_error_event_and_done(procs, pair, mode):
    pre, _unused = pair
    fake = procs.fake("decode", mode)
    w = procs.wrapper([addr(pre)], [addr(fake)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/chat/completions", dict(CHAT, stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]", body
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "one "
    # the upstream retries a cut decode stream from the start: the repeated text must not reach the client
    assert len(events) == 3, events
    err = json.loads(events[-2])["error"]
    assert err["code"] == 502 and "cut" in err["message"] and "the decode backend" in err["message"]
    assert FAKE not in err["message"] and f"decode backend {FAKE}:{fake.port}" in w.output()
    assert w.metrics()["a3_proxy_stream_interrupted_total"] == 1


def test_answer_without_usage_is_502_not_empty_200(procs, pair):
    """The upstream turns a decode answer without usage.completion_tokens into an empty 200."""
    pre, _unused = pair
    fake = procs.fake("decode", "nousage")
    w = procs.wrapper([addr(pre)], [addr(fake)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    err = assert_json_error(status, headers, body, codes=(502,))
    assert "empty body" in err["message"] and "the decode backend" in err["message"] and FAKE not in err["message"]
    assert f"decode backend {FAKE}:{fake.port}" in w.output()
    m = w.metrics()
    assert m["a3_proxy_empty_200_blocked_total"] == 1
    assert m['a3_proxy_requests_total{endpoint="/v1/chat/completions",code="502"}'] == 1


def test_failing_prefill_gives_502_naming_it(procs, pair):
    """The upstream answers a text 500 when the prefill fails: the client gets a JSON 502 with the cause."""
    _unused, dec = pair
    fake = procs.fake("prefill", "err500")
    w = procs.wrapper([addr(fake)], [addr(dec)])
    w.wait_health(200, 10)
    status, headers, body = http("POST", w.base + "/v1/completions", {"model": "glm-5.1", "prompt": "x"})
    err = assert_json_error(status, headers, body, codes=(502,))
    assert "HTTP 500" in err["message"] and "engine dead" in err["message"] and FAKE not in err["message"]
    assert f"prefill backend {FAKE}:{fake.port}" in w.output()
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
    work = lay_out(tmp_path / "work", VAS_SRC / PROXY_REL)

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
    assert "--a3-secrets-file" in r.stdout and "--a3-admin-port" in r.stdout and "--a3-max-body-bytes" in r.stdout
    r = run("--a3-etcd", "https://127.0.0.1:2379", "--a3-etcd-cert", "c.crt")
    assert r.returncode == 2 and "--a3-etcd-cert and --a3-etcd-key go together" in r.stderr
    r = run("--a3-etcd", "127.0.0.1:2379", "--a3-etcd-ca", "ca.crt")
    assert r.returncode == 2 and "need an https:// etcd address" in r.stderr
    r = run("--port", "8088", "--a3-admin-port", "8088")
    assert r.returncode == 2 and "would share the public listener's port" in r.stderr
    (work / "bad.json").write_text(json.dumps({"api_keys": ["k-secret-1"], "admin_tokn": "t-secret-2"}))
    r = run("--a3-secrets-file", "bad.json")
    assert r.returncode == 2 and "unknown keys admin_tokn" in r.stderr
    assert "secret-1" not in r.stderr + r.stdout and "secret-2" not in r.stderr + r.stdout
    r = run("--a3-secrets-file", "missing.json")
    assert r.returncode == 2 and "cannot use the secrets file" in r.stderr


# ----------------------------------------------------------------------------- the fast suite's stand-in

STANDIN = REPO / "tests" / "unit" / "proxy" / "upstream_standin.py"
# What the wrapper (a3proxy) uses of the upstream module (it sets global_args itself) and of its classes.
WRAPPER_USES = {
    "module": ("parse_args", "app", "ProxyState", "ServerState", "proxy_state"),
    "ProxyState": ("select_prefiller", "select_decoder", "release_prefiller", "release_prefiller_kv",
                   "release_decoder", "_update_prefiller_priority", "_update_decoder_priority",
                   "abort_prefiller_request", "add_prefillers", "add_decoders", "remove_prefillers", "remove_decoders"),
}


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _public_methods(cls):
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}


def test_the_fast_suites_stand_in_keeps_the_upstreams_interface(monkeypatch):
    """tests/unit/proxy/test_proxy_live.py runs the wrapper around upstream_standin.py (the fast suite has no
    vllm-ascend source tree). The stand-in must stay what it stands for: the same command line (options, defaults,
    the host and port count check), the same routes, every name the wrapper uses, and no public method the
    upstream does not have."""
    real = _module(VAS_SRC / PROXY_REL, "a3_test_real_upstream")
    standin = _module(STANDIN, "a3_test_upstream_standin")
    for argv in (["x"], ["x", "--port", "8088", "--host", "0.0.0.0", "--prefiller-hosts", "10.0.0.1", "10.0.0.2",
                         "--prefiller-ports", "1", "2", "--decoder-hosts", "10.0.0.3", "--decoder-ports", "3",
                         "--max-retries", "2", "--retry-delay", "0.5"]):
        monkeypatch.setattr(sys, "argv", argv)
        assert vars(standin.parse_args()) == vars(real.parse_args()), argv
    monkeypatch.setattr(sys, "argv", ["x", "--decoder-hosts", "a", "b", "--decoder-ports", "1"])
    for module in (real, standin):
        with pytest.raises(ValueError, match="Number of decoder hosts must match number of decoder ports"):
            module.parse_args()

    def routes(app):
        return sorted((r.path, sorted(getattr(r, "methods", None) or ())) for r in app.routes)

    assert routes(standin.app) == routes(real.app)
    for module in (real, standin):
        assert all(hasattr(module, name) for name in WRAPPER_USES["module"]), module.__name__
        assert all(callable(getattr(module.ProxyState, name, None)) for name in WRAPPER_USES["ProxyState"])
    assert _public_methods(standin.ProxyState) <= _public_methods(real.ProxyState)
    assert _public_methods(standin.ServerState) <= _public_methods(real.ServerState)


def test_drain_keeps_new_requests_off_a_backend_through_its_restart(procs, pair):
    pre, dec = pair
    port = free_port(D1)
    other = procs.engine("decode-drain", D1, port, "kv_consumer").wait_ready()
    # listed first: the upstream picks the lowest (load, index), so sequential requests would all go to it
    w = procs.wrapper([addr(pre)], [(D1, port), addr(dec)])
    w.wait_health(200, 10)
    key, drained_key = f"{D1}:{port}", ("decode", f"{D1}:{port}")
    # what a rolling restart does: drain, wait until idle, stop, start, undrain
    status, _unused, body = http("POST", w.admin + "/a3/drain", {"backends": [key]})
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
    status, _unused, body = http("POST", w.admin + "/a3/drain", {"backends": [f"{D0}:{dec.port}"]})
    assert status == 200 and json.loads(body)["drained"] == sorted([key, f"{D0}:{dec.port}"])
    status, headers, body = http("POST", w.base + "/v1/chat/completions", CHAT)
    err = assert_json_error(status, headers, body, codes=(503,))
    assert err["message"] == "no healthy decode backend in rotation; retry later"
    _unused, health = w.wait_health(503, 1)
    assert f"{key} drained for maintenance" in health["message"]  # the admin listener's /healthcheck says why
    status, _unused, body = http("POST", w.admin + "/a3/undrain", {"backends": [key, f"{D0}:{dec.port}"]})
    assert status == 200 and json.loads(body)["drained"] == []
    for i in range(4):
        status, _unused, body = http("POST", w.base + "/v1/chat/completions", CHAT)
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"], body
    assert all(b["outstanding_load"] < 1 and not b["drained"] for b in w.backends().values())
    # what the endpoints refuse
    status, _unused, body = http("POST", w.admin + "/a3/drain", {"backends": ["127.0.0.1:1"]})
    assert status == 400 and "unknown backend 127.0.0.1:1" in json.loads(body)["error"]["message"]
    assert http("GET", w.admin + "/a3/drain")[0] == 405
    assert http("POST", w.base + "/a3/drain", {"backends": [key]})[0] == 404  # never on the public listener
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
            assert http("POST", w.admin + "/a3/drain", {"backends": [names[i]]})[0] == 200
            time.sleep(1.0)  # requests selected before the drain finish
            answers.clear()
            assert engines[i].stop() == 0
            time.sleep(1.5)  # before the probes notice (fail threshold 2 x 0.5 s)
            bad = [s for s in list(answers) if s != 200]
            assert not bad and len(answers) >= 3, (names[i], answers)
            engines[i] = procs.engine(f"decode-cycle{i}-back", D1, ports[i], "kv_consumer").wait_ready()
            assert http("POST", w.admin + "/a3/undrain", {"backends": [names[i]]})[0] == 200
            deadline = time.monotonic() + DETECT_S + 5
            while (not all(b["in_rotation"] and b["healthy"] for b in w.backends().values())
                   and time.monotonic() < deadline):
                time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)


# ----------------------------------------------------------------------------- the listeners and limits (stub engines)

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """Client keys, an admin token and a backend key; the stub engines want the backend key."""
    edge = Edge(tmp_path_factory.mktemp("secured"), "secured", secrets=SECRETS, key=SECRETS["backend_api_key"])
    yield edge
    edge.stop()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """No secrets file at all (the default deployment): no key anywhere."""
    edge = Edge(tmp_path_factory.mktemp("plain"), "plain")
    yield edge
    edge.stop()


@pytest.fixture(scope="module")
def lenient(tmp_path_factory):
    """As secured, with room for many requests at once."""
    edge = Edge(tmp_path_factory.mktemp("lenient"), "lenient", secrets=SECRETS, key=SECRETS["backend_api_key"],
                extra=["--a3-max-inflight", "64"])
    yield edge
    edge.stop()


@pytest.fixture(scope="module")
def dead(tmp_path_factory):
    """A decode that never answers (nothing listens on its port)."""
    edge = Edge(tmp_path_factory.mktemp("dead"), "dead", decode_dead=True)
    yield edge
    edge.stop()


def test_the_public_listener_serves_only_the_client_paths(secured):
    base = secured.w.base
    for method, path in [("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/redoc"),
                         ("GET", "/docs/oauth2-redirect"),
                         ("GET", "/a3/backends"), ("GET", "/metrics"), ("POST", "/a3/drain"), ("POST", "/a3/undrain"),
                         ("POST", "/instances/add"), ("POST", "/instances/remove"), ("GET", "/v1/nothing")]:
        body = {"type": "decode", "instances": ["127.0.0.1:1"]} if method == "POST" else None
        status, _unused, answer = http(method, base + path, body, headers=CLIENT)
        err = assert_openai_error(status, answer, 404, "unknown_url")
        assert path in err["message"]
        # without a key the path is not even confirmed to exist
        status, headers, answer = http(method, base + path, body)
        assert_openai_error(status, answer, 401, "invalid_api_key")
    for method, path, allowed in [("GET", "/v1/completions", "POST"), ("GET", "/v1/chat/completions", "POST"),
                                  ("POST", "/v1/models", "GET"), ("POST", "/healthcheck", "GET"),
                                  ("DELETE", "/healthcheck", "GET")]:
        status, headers, answer = http(method, base + path, {} if method == "POST" else None, headers=CLIENT)
        assert_openai_error(status, answer, 405, "method_not_allowed")
        assert headers["allow"] == allowed
    # the upstream's rotation was not touched through the public listener
    assert {k: b["in_rotation"] for k, b in secured.w.backends().items()} == {
        ("prefill", secured.prefill.key_text): True, ("decode", secured.decode.key_text): True}


def test_the_admin_listener_and_its_token(secured):
    admin, token = secured.w.admin, {"authorization": "Bearer " + SECRETS["admin_token"]}
    status, _unused, body = http("GET", admin + "/healthcheck")  # no token needed: what the role waits on
    assert status == 200 and json.loads(body)["healthy_decode"] == 1
    for method, path in [("GET", "/a3/backends"), ("GET", "/metrics"), ("POST", "/a3/drain"), ("POST", "/a3/undrain"),
                         ("POST", "/instances/add"), ("POST", "/instances/remove"), ("GET", "/docs")]:
        for headers in ({}, {"authorization": "Bearer wrong-token"},
                        {"authorization": "Bearer " + SECRETS["api_keys"][0]},
                        {"authorization": SECRETS["admin_token"]}):
            status, answer_headers, answer = http(method, admin + path, {} if method == "POST" else None,
                                                  headers=headers)
            assert_openai_error(status, answer, 401, "invalid_api_key")
            assert answer_headers["www-authenticate"] == "Bearer"
            assert not any(v.encode() in answer for v in SECRET_VALUES + ["wrong-token"])
    status, _unused, body = http("GET", admin + "/a3/backends", headers=token)
    assert status == 200 and {b["backend"] for b in json.loads(body)} == {secured.prefill.key_text,
                                                                          secured.decode.key_text}
    status, headers, body = http("GET", admin + "/metrics", headers=token)
    assert status == 200 and headers["content-type"].startswith("text/plain") and b"a3_proxy_backend_up" in body
    for method, path in [("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/redoc"), ("POST", "/v1/completions"),
                         ("GET", "/v1/models")]:
        status, _unused, body = http(method, admin + path, {} if method == "POST" else None, headers=token)
        assert_openai_error(status, body, 404, "unknown_url")
    status, headers, body = http("GET", admin + "/a3/drain", headers=token)
    assert_openai_error(status, body, 405, "method_not_allowed")
    # the upstream's own /instances/* are served here, with its own answer
    status, _unused, body = http("POST", admin + "/instances/remove", {"type": "bogus", "instances": []}, headers=token)
    assert status == 200 and "Instance type bogus is not supported" in json.loads(body)["error"]
    status, _unused, body = http("POST", admin + "/a3/drain", {"backends": ["127.0.0.1:1"]}, headers=token)
    assert_openai_error(status, body, 400, 400, "BadRequestError")


def test_client_keys(secured):
    body = {"model": "glm-5.1", "prompt": prompt(), "max_tokens": 4}
    wrong = "client-key-WRONG999"
    for headers in ({}, {"authorization": "Bearer " + wrong}, {"authorization": "Basic " + SECRETS["api_keys"][0]},
                    {"authorization": "Bearer " + SECRETS["admin_token"]}, {"authorization": "Bearer "},
                    {"authorization": "Bearer " + SECRETS["api_keys"][0][:-1]}):
        for path in ("/v1/completions", "/v1/chat/completions", "/v1/models"):
            status, answer_headers, answer = http("GET" if path == "/v1/models" else "POST", secured.w.base + path,
                                                  None if path == "/v1/models" else body, headers=headers)
            err = assert_openai_error(status, answer, 401, "invalid_api_key")
            assert answer_headers["www-authenticate"] == "Bearer" and "Authorization: Bearer" in err["message"]
            assert not any(v.encode() in answer for v in SECRET_VALUES + [wrong])
    assert not secured.prefill.tagged(tag_of(body["prompt"]))  # nothing was forwarded
    for key in SECRETS["api_keys"]:
        status, _unused, answer = secured.post("/v1/completions", body, headers={"authorization": "bearer " + key})
        assert status == 200 and json.loads(answer)["choices"][0]["text"] == "hello", answer
    # /healthcheck needs no key
    assert http("GET", secured.w.base + "/healthcheck")[0] == 200
    m = secured.w.metrics()
    assert m["a3_proxy_unauthorized_total"] >= 18
    assert m['a3_proxy_requests_total{endpoint="/v1/completions",code="401"}'] >= 6
    log = secured.w.output()
    assert not any(v in log for v in SECRET_VALUES + [wrong]), "a secret in the proxy's log"


def test_the_backend_key_goes_to_the_engines_and_the_client_key_does_not(secured):
    body = {"model": "glm-5.1", "prompt": prompt(), "max_tokens": 4}
    status, _unused, answer = secured.post("/v1/completions", body)
    assert status == 200, answer
    chat = {"model": "glm-5.1", "messages": [{"role": "user", "content": prompt()}], "stream": True}
    status, _unused, answer = secured.post("/v1/chat/completions", chat)
    assert status == 200 and sse_events(answer)[-1] == "[DONE]"
    status, _unused, answer = http("GET", secured.w.base + "/v1/models", headers=CLIENT)
    assert status == 200
    calls = [c for c in secured.prefill.calls + secured.decode.calls
             if c["tag"] in (tag_of(body["prompt"]), tag_of(chat["messages"][0]["content"])) or c["method"] == "GET"]
    assert len(calls) >= 5
    assert {c["auth"] for c in calls} == {"Bearer " + SECRETS["backend_api_key"]}


def test_without_a_backend_key_no_authorization_reaches_the_engines(plain):
    """The upstream writes "Bearer $OPENAI_API_KEY" itself, "Bearer None" when unset; the client's own header must
    not go further either."""
    own = {"authorization": "Bearer client-own-secret"}
    body = {"model": "glm-5.1", "prompt": prompt(), "max_tokens": 4}
    assert plain.post("/v1/completions", body, headers=own)[0] == 200
    stream = dict(body, prompt=prompt(), stream=True)
    assert plain.post("/v1/completions", stream, headers=own)[0] == 200
    assert http("GET", plain.w.base + "/v1/models", headers=own)[0] == 200
    tags = (tag_of(body["prompt"]), tag_of(stream["prompt"]))
    calls = [c for c in plain.prefill.calls + plain.decode.calls if c["tag"] in tags or c["method"] == "GET"]
    assert len(calls) >= 5 and all(c["auth"] is None for c in calls), calls
    # and the admin listener needs no token without one
    assert http("GET", plain.w.admin + "/a3/backends")[0] == 200


def test_a_backend_4xx_is_passed_on_once_and_does_not_mark_the_backend(secured):
    text = prompt()
    before = secured.w.backends()
    probes = len(secured.decode.health_times)
    t0 = time.monotonic()
    status, headers, answer = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": text, "max_tokens": -5})
    assert status == 400 and headers["content-type"].startswith("application/json"), answer
    # the engine's message, in OpenAI's shape (this engine answers in vLLM's older {"object": "error", ...})
    assert json.loads(answer)["error"] == {"message": "max_tokens must be at least 1, got -5.",
                                           "type": "BadRequestError", "param": None, "code": 400}
    assert time.monotonic() - t0 < 1.0
    assert len(secured.decode.tagged(tag_of(text))) == 1  # the upstream would send it 3 times
    assert len(secured.prefill.tagged(tag_of(text))) == 1
    stream = prompt()
    status, _unused, answer = secured.post("/v1/chat/completions", {
        "model": "glm-5.1", "messages": [{"role": "user", "content": stream}], "max_tokens": 0, "stream": True})
    assert status == 400 and "got 0" in json.loads(answer)["error"]["message"]
    assert len(secured.decode.tagged(tag_of(stream))) == 1
    time.sleep(0.8)  # a failed request makes the prober run within 0.2 s: this one must not
    after = secured.w.backends()
    for key, back in after.items():
        assert back["request_failures"] == before[key]["request_failures"], back
        assert back["in_rotation"] and back["healthy"]
    assert len(secured.decode.health_times) == probes
    assert secured.w.metrics()["a3_proxy_backend_client_errors_total"] >= 2
    # a failure that is the backend's does make the prober look at once (the check above can see it)
    failing = prompt("d=err500")
    status, _unused, _unused = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": failing})
    assert status == 502
    deadline = time.monotonic() + 3
    while len(secured.decode.health_times) == probes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(secured.decode.health_times) > probes
    assert secured.w.backends()[("decode", secured.decode.key_text)]["request_failures"] == \
        before[("decode", secured.decode.key_text)]["request_failures"] + 1


def test_an_engine_refusing_the_proxys_key_is_a_502_not_a_401(secured):
    """A 401 of an engine means the proxy's own key (vllm_api_key) is wrong, not the client's: 502 saying so, once."""
    text = prompt("d=unauth")
    status, _unused, answer = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": text})
    err = assert_openai_error(status, answer, 502, 502, "BadGatewayError")
    assert "refused the proxy's key" in err["message"] and "vllm_api_key" in err["message"]
    assert len(secured.decode.tagged(tag_of(text))) == 1
    assert "refused the proxy's key (HTTP 401)" in secured.w.output()


def test_the_body_cap(secured):
    host, port = LOCAL, secured.w.port
    auth = b"Authorization: Bearer " + SECRETS["api_keys"][0].encode() + b"\r\n"
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth
    # by Content-Length: refused before the body is read
    answer, _unused = raw_exchange(host, port, [head + b"Content-Length: 5000\r\n\r\n"], timeout=5)
    status_line, _sep, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line, answer
    body = rest.split(b"\r\n\r\n", 1)[1]
    assert_openai_error(413, body, 413, "request_too_large")
    assert b"connection: close" in rest.lower()
    # chunked: refused once more than the limit came
    tag = prompt()
    start = b'{"model": "glm-5.1", "prompt": "%s", "pad": "' % tag.encode()
    chunk = b"x" * 1024
    parts = [head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(start), start)]
    parts += [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 4  # then nothing more: over the limit, never ended
    answer, _unused = raw_exchange(host, port, parts, pause=0.05, timeout=5)
    assert b" 413 " in answer.split(b"\r\n", 1)[0], answer
    assert_openai_error(413, answer.split(b"\r\n\r\n", 1)[1], 413, "request_too_large")
    assert not secured.prefill.tagged(tag_of(tag)) and not secured.decode.tagged(tag_of(tag))
    # the limit itself is accepted
    text = prompt()
    body = {"model": "glm-5.1", "prompt": text, "max_tokens": 4, "pad": ""}
    body["pad"] = "y" * (4096 - len(json.dumps(body)))
    assert len(json.dumps(body)) == 4096
    status, _unused, answer = secured.post("/v1/completions", body)
    assert status == 200, answer
    status, _unused, answer = secured.post("/v1/completions", dict(body, pad=body["pad"] + "y"))
    assert_openai_error(status, answer, 413, "request_too_large")
    assert secured.w.metrics()["a3_proxy_body_too_large_total"] >= 3


def test_the_open_request_limit(secured):
    """Three requests hang (the limit of the edge listener); the fourth gets 503 at once, /healthcheck still
    answers, and once they are over a request goes through again."""
    results = []
    threads = [threading.Thread(target=lambda: results.append(secured.post(
        "/v1/completions", {"model": "glm-5.1", "prompt": prompt("d=hang")}))) for _unused in range(3)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 2
        while secured.w.metrics()["a3_proxy_open_requests"] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        text = prompt()
        status, headers, answer = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": text})
        assert time.monotonic() - t0 < 0.5
        err = assert_openai_error(status, answer, 503, 503, "ServiceUnavailableError")
        assert headers["retry-after"] == "7" and "limit" in err["message"]
        assert not secured.prefill.tagged(tag_of(text))
        status, _unused, _unused = http("GET", secured.w.base + "/v1/models", headers=CLIENT)
        assert status == 503
        assert http("GET", secured.w.base + "/healthcheck")[0] == 200
    finally:
        for t in threads:
            t.join(FIRST_BYTE_S + 5)
    assert [r[0] for r in results] == [503, 503, 503]  # their first-byte timeout
    deadline = time.monotonic() + 5
    while secured.w.metrics()["a3_proxy_open_requests"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert secured.w.metrics()["a3_proxy_open_requests"] == 0
    assert secured.post("/v1/completions", {"model": "glm-5.1", "prompt": prompt()})[0] == 200
    assert secured.w.metrics()["a3_proxy_busy_total"] >= 2


def test_the_header_timeout_cuts_a_slow_client(secured):
    before = secured.w.metrics()["a3_proxy_header_timeouts_total"]
    # headers a line at a time, never complete: cut after the header timeout (1 s), not when the lines stop
    parts = [b"POST /v1/completions HTTP/1.1\r\n"] + [b"X-Slow-%d: y\r\n" % i for i in range(40)]
    answer, took = raw_exchange(LOCAL, secured.w.port, parts, pause=0.2, timeout=6)
    assert 0.9 <= took <= 2.5, took
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert_openai_error(408, answer.split(b"\r\n\r\n", 1)[1], 408, "request_timeout")
    # a connection that sends nothing at all, on the admin listener too
    for port in (secured.w.port, secured.w.admin_port):
        answer, took = raw_exchange(LOCAL, port, [b""], timeout=6)
        assert took <= 2.5 and answer.startswith(b"HTTP/1.1 408 "), (port, took, answer)
    # a kept-alive connection: the next request's headers have their own timeout
    with socket.create_connection((LOCAL, secured.w.port), timeout=6) as sock:
        sock.sendall(b"GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while not first.endswith(b'{"status": "ok"}'):
            first += sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /healthcheck HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        answer = read_until_close(sock, t0 + 6)
        assert answer.startswith(b"HTTP/1.1 408 ") and time.monotonic() - t0 <= 2.5, answer
    assert secured.w.metrics()["a3_proxy_header_timeouts_total"] >= before + 4


def test_the_body_timeout(secured):
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
            b"Authorization: Bearer " + SECRETS["api_keys"][1].encode() + b"\r\n\r\n")
    answer, took = raw_exchange(LOCAL, secured.w.port, [head, b'{"model": '], pause=0.1, timeout=6)
    assert 0.9 <= took <= 2.5, took
    assert b" 408 " in answer.split(b"\r\n", 1)[0], answer
    assert_openai_error(408, answer.split(b"\r\n\r\n", 1)[1], 408, "request_timeout")
    assert secured.w.metrics()["a3_proxy_body_timeouts_total"] >= 1


def test_a_stalled_stream_ends_with_an_error_event_and_done(secured):
    t0 = time.monotonic()
    status, headers, answer = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": prompt("d=stall"),
                                                               "stream": True})
    took = time.monotonic() - t0
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), answer
    assert took <= IDLE_S, took
    events = sse_events(answer)
    assert json.loads(events[0])["choices"][0]["text"] == "one "
    err = json.loads(events[-2])["error"]
    assert events[-1] == "[DONE]" and len(events) == 3, events
    assert err["code"] == 504 and "idle timeout" in err["message"] and "the decode backend" in err["message"]


def test_a_stalled_answer_gets_504(secured):
    t0 = time.monotonic()
    status, _unused, answer = secured.post("/v1/chat/completions", {
        "model": "glm-5.1", "messages": [{"role": "user", "content": prompt("d=stall")}]})
    assert time.monotonic() - t0 <= IDLE_S
    err = assert_openai_error(status, answer, 504, 504, "GatewayTimeoutError")
    assert "idle timeout" in err["message"]
    assert secured.w.metrics()["a3_proxy_idle_timeouts_total"] >= 1


def test_client_kv_transfer_params_are_dropped(secured):
    """With a prefill answer that carries no kv_transfer_params, the upstream would hand the client's own to the
    decode (which remote blocks to pull, from which host)."""
    text = prompt("p=nokv")
    evil = {"do_remote_prefill": True, "remote_host": "203.0.113.9", "remote_port": 1, "remote_block_ids": [7]}
    status, _unused, answer = secured.post("/v1/completions", {"model": "glm-5.1", "prompt": text, "max_tokens": 4,
                                                               "kv_transfer_params": evil})
    assert status == 200, answer
    (prefill,) = secured.prefill.tagged(tag_of(text))
    (decode,) = secured.decode.tagged(tag_of(text))
    assert prefill["body"]["kv_transfer_params"]["do_remote_decode"] is True  # the upstream's own
    assert "kv_transfer_params" not in decode["body"], decode["body"]
    assert "203.0.113.9" not in json.dumps(prefill["body"])
    assert secured.w.metrics()["a3_proxy_kv_transfer_params_dropped_total"] >= 1


def test_models_come_from_a_healthy_backend(secured, dead):
    status, _unused, answer = http("GET", secured.w.base + "/v1/models", headers=CLIENT)
    assert status == 200 and json.loads(answer)["data"][0]["id"] == "glm-5.1"
    last = [c for c in secured.decode.calls if c["path"] == "/v1/models"][-1]
    assert last["auth"] == "Bearer " + SECRETS["backend_api_key"]  # a decode first, with the backend key
    # the prefill answers /health but no decode does: still one healthy backend to ask
    status, _unused, answer = http("GET", dead.w.base + "/v1/models")
    assert status == 200 and json.loads(answer)["object"] == "list"
    dead.w.wait_health(503, 5)
    status, _unused, _unused = http("POST", dead.w.admin + "/a3/drain", {"backends": [dead.prefill.key_text]})
    try:
        status, headers, answer = http("GET", dead.w.base + "/v1/models")
        err = assert_openai_error(status, answer, 503, 503, "ServiceUnavailableError")
        assert headers["retry-after"] == "7" and "127.0.0.1" not in err["message"]
    finally:
        http("POST", dead.w.admin + "/a3/undrain", {"backends": [dead.prefill.key_text]})


def test_the_public_healthcheck_names_no_backend(dead):
    status, headers, answer = http("GET", dead.w.base + "/healthcheck")
    assert status == 503 and headers["retry-after"] == "7"
    assert json.loads(answer) == {"status": "unavailable", "missing": ["decode"],
                                  "message": "no healthy decode backend in rotation; retry later"}
    status, _unused, answer = http("GET", dead.w.admin + "/healthcheck")
    assert status == 503 and "127.0.0.1:" in json.loads(answer)["message"]  # the admin one does
    status, headers, answer = dead.post("/v1/completions", {"model": "glm-5.1", "prompt": prompt()}, headers={})
    err = assert_openai_error(status, answer, 503, 503, "ServiceUnavailableError")
    assert headers["retry-after"] == "7" and err["message"] == "no healthy decode backend in rotation; retry later"


def _failures(edge):
    """A series of requests that fail in every way the proxy knows, each in its own thread where it waits."""
    post = edge.post
    plans = [
        ("/v1/completions", {"prompt": prompt("d=err500")}),                     # empty 200 of the upstream
        ("/v1/completions", {"prompt": prompt("d=err500"), "stream": True}),
        ("/v1/completions", {"prompt": prompt("p=err500")}),                     # the upstream raises
        ("/v1/completions", {"prompt": prompt("d=leak400")}),                    # a backend's 4xx
        ("/v1/completions", {"prompt": prompt(), "max_tokens": -1, "stream": True}),
        ("/v1/completions", {"prompt": prompt("d=hang")}),                       # first-byte timeout
        ("/v1/completions", {"prompt": prompt("p=hang"), "stream": True}),
        ("/v1/completions", {"prompt": prompt("d=stall"), "stream": True}),      # idle timeout
        ("/v1/completions", {"prompt": prompt("d=stall")}),
        ("/v1/completions", {"prompt": prompt("d=cut"), "stream": True}),        # cut mid-stream
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": prompt("p=nokv")}], "max_tokens": 2}),
    ]
    answers = []

    def one(path, extra):
        answers.append(post(path, dict({"model": "glm-5.1"}, **extra)))

    threads = [threading.Thread(target=one, args=plan) for plan in plans]
    for t in threads:
        t.start()
    # a client that leaves in the middle of a stream
    conn = httpclient.HTTPConnection(LOCAL, edge.w.port, timeout=5)
    conn.request("POST", "/v1/completions", json.dumps({"model": "glm-5.1", "prompt": prompt("d=stall"),
                                                        "stream": True}),
                 {"content-type": "application/json", **CLIENT})
    response = conn.getresponse()
    assert response.status == 200 and response.read1(100)
    conn.close()
    for t in threads:
        t.join(FIRST_BYTE_S + 10)
    return answers


def test_the_upstream_load_counts_are_released_whatever_way_a_request_ends(lenient):
    answers = _failures(lenient)
    codes = sorted(a[0] for a in answers)
    assert codes == [200, 200, 200, 400, 400, 502, 502, 502, 503, 503, 504], codes
    backs = lenient.settled()
    for back in backs.values():
        assert back["inflight_requests"] == 0 and back["outstanding_load"] == 0, back
    assert lenient.post("/v1/completions", {"model": "glm-5.1", "prompt": prompt()})[0] == 200
    assert lenient.w.metrics()["a3_proxy_load_released_total"] >= 8


def test_no_internal_address_in_any_client_body(lenient, dead):
    bodies = [a[2] for a in _failures(lenient)]
    bodies += [http("GET", dead.w.base + "/healthcheck")[2],
               dead.post("/v1/completions", {"model": "glm-5.1", "prompt": prompt()}, headers={})[2],
               http("GET", lenient.w.base + "/a3/backends", headers=CLIENT)[2],
               http("GET", lenient.w.base + "/v1/models", headers=CLIENT)[2]]
    ports = [str(p) for p in (lenient.prefill.port, lenient.decode.port, dead.prefill.port)]
    for body in bodies:
        text = body.decode("utf-8", "replace")
        assert "127.0.0.1" not in text and "http://" not in text, text
        assert not any(re.search(r"\b%s\b" % p, text) for p in ports), text
    assert any("[address hidden]" in b.decode() for b in bodies)  # the engine's own 400 named its URL
    log = lenient.w.output()
    assert f"decode backend {lenient.decode.key_text}" in log and f"http://{lenient.decode.key_text}" in log


# ----------------------------------------------------------------------------- etcd over TLS

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _pki(tmp):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all made with the openssl tool."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=test etcd ca", cwd=tmp)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        (tmp / f"{name}.ext").write_text(ext + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN=a3 {name}", cwd=tmp)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext", cwd=tmp)
    return tmp


class TlsEtcd:
    """etcd's JSON gateway, POST /v3/kv/range only, over TLS with client certificates required."""

    def __init__(self, pki, kvs):
        self.peers = []
        etcd = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                etcd.peers.append(dict(x[0] for x in self.connection.getpeercert()["subject"])["commonName"])
                send_json(self, 200, {"header": {}, "kvs": kvs})

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki / "server.crt", pki / "server.key")
        context.load_verify_locations(pki / "ca.crt")
        context.verify_mode = ssl.CERT_REQUIRED
        self.server = ThreadingHTTPServer((LOCAL, 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_etcd_over_tls_with_a_client_certificate(tmp_path):
    import base64
    if shutil.which("openssl") is None:
        pytest.fail("this test makes its certificates with the openssl tool, which is missing: apt-get install openssl",
                    pytrace=False)
    (tmp_path / "pki").mkdir()
    pki = _pki(tmp_path / "pki")
    worker = "127.0.0.1:18481"
    kv = {"key": base64.b64encode(b"/datasystem/cluster/" + worker.encode()).decode(),
          "value": base64.b64encode(b"1700000000;ready").decode()}
    etcd = TlsEtcd(pki, [kv])
    edge = None
    try:
        edge = Edge(tmp_path, "tls", extra=["--a3-etcd", f"https://127.0.0.1:{etcd.port}", "--a3-etcd-ca",
                                            str(pki / "ca.crt"), "--a3-etcd-cert", str(pki / "client.crt"),
                                            "--a3-etcd-key", str(pki / "client.key"), "--a3-ds-worker", worker])
        m = edge.w.metrics()
        assert m["a3_proxy_etcd_read_ok"] == 1 and m[f'a3_proxy_ds_worker_registered{{worker="{worker}"}}'] == 1
        assert etcd.peers and set(etcd.peers) == {"a3 client"}  # the proxy presented its client certificate
    finally:
        if edge is not None:
            edge.stop()
        etcd.stop()
