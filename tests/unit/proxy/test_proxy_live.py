# -*- coding: utf-8 -*-
"""The honest proxy's live path in the fast suite: a3_proxy.py as the role lays it out (the wrapper, its package
and an upstream script side by side) runs as a process with its two uvicorn listeners on 127.0.0.1, probing
and forwarding to stub engines in this process (stub_engine.py, which the sim stage's tests use too; 127.0.0.1,
port 0). The upstream script is upstream_standin.py (the real one comes with the vllm-ascend source
distribution, which only the simulated cluster's build downloads: tests/sim/test_honest_proxy.py runs the
wrapper around it and checks that the stand-in keeps its interface).

What is asserted here, through real sockets: the 503 with Retry-After while no backend is healthy (at once, and
after the prober took one out), the first-byte rule (a status line and headers are not a first byte; the
first-byte timeout gives 503 and cancels the upstream request; once the first byte came, only the idle timeout
counts), an empty 200 of the engines becomes a 502, the streaming relay (a chunk reaches the client before the
engine sends the next), the client keys of the public listener (401), the admin token, the body cap, the header
timeout of the real uvicorn protocol and the open-request limit.

Needs fastapi, httpx and uvicorn (requirements.txt): without them every test here fails, naming what to run.
Nothing outside 127.0.0.1 is contacted; every process and server is stopped in its fixture's teardown.
"""
from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from stub_engine import LOCAL, StubEngine, prompt, sse_events, tag_of
from wrapper_process import Process, lay_out, parse_metrics, wrapper_argv

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "upstream_standin.py"
WEB_STACK = ("fastapi", "httpx", "uvicorn")


def _web_stack_or_fail():
    """The web stack the wrapper runs on, in this interpreter (the wrapper process is started with it too)."""
    missing = []
    for name in WEB_STACK:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append("%s (%s)" % (name, exc))
    if missing:
        pytest.fail("the proxy's live tests need %s in %s: run ./setup.sh (it installs requirements.txt into .venv)"
                    % (", ".join(missing), sys.executable), pytrace=False)


_web_stack_or_fail()
import httpx  # noqa: E402  (checked above, with a message that says what to do)

RETRY_AFTER = "7"
FIRST_BYTE_S = 1.5
IDLE_S = 1.5
HEADER_S = 1.0
MAX_BODY = 4096
MAX_INFLIGHT = 2
# Fast settings: probes every 0.3 s, a backend leaves the rotation after 2 failed ones.
FAST = ["--a3-probe-interval", "0.3", "--a3-probe-timeout", "0.5", "--a3-fail-threshold", "2",
        "--a3-retry-after", RETRY_AFTER, "--a3-first-byte-timeout", str(FIRST_BYTE_S), "--a3-idle-timeout", str(IDLE_S),
        "--a3-header-timeout", str(HEADER_S), "--a3-body-timeout", "2", "--a3-max-body-bytes", str(MAX_BODY),
        "--a3-max-inflight", str(MAX_INFLIGHT)]
SLACK_S = 2.5  # what a busy machine may add to a timeout
LATE_S = FIRST_BYTE_S + SLACK_S


def free_port():
    with socket.socket() as sock:
        sock.bind((LOCAL, 0))
        return sock.getsockname()[1]


def clean_env():
    """The environment without proxies (as proxy.sh unsets them): the upstream's clients trust it."""
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    assert predicate(), "%s: not within %ss" % (what, timeout)


# ----------------------------------------------------------------------------- the wrapper as a process

class Wrapper(Process):
    """python a3_proxy.py in its work directory, beside the stand-in upstream script: the public listener (base)
    and the admin listener (admin) on 127.0.0.1. stop() sends SIGTERM, as systemd and docker stop do, and returns
    the exit status."""

    def __init__(self, tmp, prefills, decodes, secrets=None):
        work = lay_out(tmp / "work", STANDIN)
        self.port, self.admin_port = free_port(), free_port()
        self.base, self.admin = "http://%s:%d" % (LOCAL, self.port), "http://%s:%d" % (LOCAL, self.admin_port)
        argv, self.admin_headers = wrapper_argv(work, self.port, self.admin_port, prefills, decodes, options=FAST,
                                                secrets=secrets)
        super().__init__(argv, clean_env(), work, "a3_proxy")
        self.client = httpx.Client(trust_env=False, timeout=15)

    def output(self):
        return super().output()[-4000:]

    def wait_listening(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the wrapper exited:\n" + self.output()
            try:
                self.client.get(self.admin + "/healthcheck", timeout=1)
                self.client.get(self.base + "/healthcheck", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the wrapper did not listen within %ss:\n%s" % (timeout, self.output()))

    def wait_health(self, status, timeout=10):
        wait_until(lambda: self.client.get(self.admin + "/healthcheck").status_code == status, timeout,
                   "the admin /healthcheck answering %d\n%s" % (status, self.output()))

    def metrics(self):
        answer = self.client.get(self.admin + "/metrics", headers=self.admin_headers)
        assert answer.status_code == 200, answer.text
        return parse_metrics(answer.text)

    def stop(self, timeout=15):
        self.client.close()  # no kept-alive connection for the graceful shutdown to wait on
        return super().stop(timeout)


def start(tmp, prefills, decodes, secrets=None):
    wrapper = Wrapper(tmp, prefills, decodes, secrets)
    try:
        return wrapper.wait_listening()
    except BaseException:
        wrapper.stop()
        raise


def stopped_cleanly(wrapper):
    rc = wrapper.stop()
    assert rc == 0, "SIGTERM did not stop the wrapper with status 0 (got %s):\n%s" % (rc, wrapper.output())


def serving(tmp, key=None, secrets=None):
    """For a fixture: a wrapper (with secrets, the secrets file's content) in front of one prefill and one decode
    stub (with key, they want that engines' key), both healthy; yields (wrapper, prefill, decode), stops them all."""
    p, d = StubEngine("prefill", key=key, late_s=LATE_S), StubEngine("decode", key=key, late_s=LATE_S)
    wrapper = None
    try:
        wrapper = start(tmp, [(p.host, p.port)], [(d.host, d.port)], secrets)
        wrapper.wait_health(200)
        yield wrapper, p, d
    finally:
        if wrapper is not None:
            stopped_cleanly(wrapper)
        p.stop()
        d.stop()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A wrapper without keys in front of one prefill and one decode stub, both healthy."""
    yield from serving(tmp_path_factory.mktemp("plain"))


CLIENT_KEY, ADMIN_TOKEN, ENGINE_KEY = "client-key-1", "admin-token-2", "engine-key-3"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A wrapper with a client key, an admin token and the engines' key, in front of stubs that need that key."""
    yield from serving(tmp_path_factory.mktemp("keyed"), ENGINE_KEY,
                       {"api_keys": [CLIENT_KEY], "admin_token": ADMIN_TOKEN, "backend_api_key": ENGINE_KEY})


def chat(text, stream=False):
    return {"model": "glm-5.1", "messages": [{"role": "user", "content": text}], "max_tokens": 8, "stream": stream}


def post(wrapper, body, path="/v1/chat/completions", headers=None):
    """(status, headers, body bytes, seconds) of one POST to the public listener."""
    began = time.monotonic()
    answer = wrapper.client.post(wrapper.base + path, json=body, headers=headers or {})
    return answer.status_code, answer.headers, answer.content, time.monotonic() - began


def openai_error(status, body, want, etype, code=None):
    assert status == want, (status, body)
    err = json.loads(body)["error"]
    assert err["type"] == etype and err["code"] == (want if code is None else code) and err["message"], err
    return err


# ----------------------------------------------------------------------------- no healthy backend: 503 at once

def test_no_healthy_backend_is_a_503_with_retry_after_at_once(tmp_path):
    """Backends that never answer (nothing listens on their ports): before the first probe and after the prober took
    them out, a completion gets 503 with Retry-After at once, the public /healthcheck too, without an address."""
    dead = [(LOCAL, free_port()), (LOCAL, free_port())]
    wrapper = start(tmp_path, dead[:1], dead[1:])
    try:
        for _round in ("right after the start", "once the probes took them out"):
            status, headers, body, took = post(wrapper, chat(prompt()))
            err = openai_error(status, body, 503, "ServiceUnavailableError")
            assert headers["retry-after"] == RETRY_AFTER and took < FIRST_BYTE_S, (headers, took)
            assert err["message"] == "no healthy prefill and no healthy decode backend in rotation; retry later"
            answer = wrapper.client.get(wrapper.base + "/healthcheck")
            assert answer.status_code == 503 and answer.headers["retry-after"] == RETRY_AFTER
            assert answer.json() == {"status": "unavailable", "missing": ["prefill", "decode"],
                                     "message": err["message"]}
            answer = wrapper.client.get(wrapper.base + "/v1/models")
            assert answer.status_code == 503 and answer.headers["retry-after"] == RETRY_AFTER
            wait_until(lambda: all(b["state"] == "down" for b in wrapper.client.get(wrapper.admin + "/a3/backends")
                                   .json()), 10, "both backends down")
        full = wrapper.client.get(wrapper.admin + "/healthcheck")
        assert full.status_code == 503 and "%s:%d out of rotation" % dead[1] in full.json()["message"]
        assert wrapper.metrics()["a3_proxy_no_backend_total"] == 4  # two completions, two model lists
    finally:
        stopped_cleanly(wrapper)


def test_a_decode_the_prober_took_out_gives_503_until_it_is_back(plain):
    wrapper, p, d = plain
    d.health = 503
    try:
        wrapper.wait_health(503)
        text = prompt()
        status, headers, body, took = post(wrapper, chat(text))
        err = openai_error(status, body, 503, "ServiceUnavailableError")
        assert headers["retry-after"] == RETRY_AFTER and took < FIRST_BYTE_S
        assert err["message"] == "no healthy decode backend in rotation; retry later"
        assert p.tagged(tag_of(text)) == [] and d.tagged(tag_of(text)) == []  # refused before anything was sent
    finally:
        d.health = 200
    wrapper.wait_health(200)
    status, _unused, body, _unused = post(wrapper, chat(prompt()))
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "hello"


# ----------------------------------------------------------------------------- the first byte

@pytest.mark.parametrize("stream", [False, True])
def test_a_status_line_and_headers_are_not_a_first_byte(plain, stream):
    """The decode answers 200 with its headers and then nothing: the client gets 503 with Retry-After once the
    first-byte timeout passed (never the 200 the upstream had started), and the upstream request is cancelled:
    the decode sees its connection closed."""
    wrapper, _unused, d = plain
    before = wrapper.metrics()["a3_proxy_first_byte_timeouts_total"]
    text = prompt("d=headers")
    status, headers, body, took = post(wrapper, chat(text, stream))
    err = openai_error(status, body, 503, "ServiceUnavailableError")
    assert headers["retry-after"] == RETRY_AFTER and "first-byte timeout" in err["message"], err
    assert "the decode backend" in err["message"] and LOCAL not in err["message"], err
    assert FIRST_BYTE_S - 0.05 <= took < FIRST_BYTE_S + SLACK_S, took
    assert wrapper.metrics()["a3_proxy_first_byte_timeouts_total"] == before + 1
    wait_until(lambda: d.tagged(tag_of(text))[0].get("closed"), 10, "the decode's connection closed by the proxy")


def test_a_first_byte_after_the_timeout_is_too_late(plain):
    wrapper, _unused, d = plain
    text = prompt("d=late")
    status, headers, body, took = post(wrapper, chat(text))
    openai_error(status, body, 503, "ServiceUnavailableError")
    assert headers["retry-after"] == RETRY_AFTER and took < LATE_S, took  # not waiting for the late answer
    wait_until(lambda: d.tagged(tag_of(text))[0].get("closed"), 10, "the decode's connection closed by the proxy")


def test_once_the_first_byte_came_only_the_idle_timeout_counts(plain):
    """Events 0.6 s apart: the whole answer (1.8 s) takes longer than the first-byte timeout, each gap is shorter
    than the idle timeout; the client gets all of it."""
    wrapper, _unused, _unused = plain
    status, headers, body, took = post(wrapper, chat(prompt("d=slow"), stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, body)
    events = sse_events(body)
    assert [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-1]] == ["one ", "two ", "three"]
    assert events[-1] == "[DONE]" and took > FIRST_BYTE_S, (events, took)


def test_a_stream_that_stalls_after_its_first_byte_ends_with_an_error_event_and_done(plain):
    wrapper, _unused, _unused = plain
    status, _unused, body, took = post(wrapper, chat(prompt("d=stall"), stream=True))
    events = sse_events(body)
    assert status == 200 and json.loads(events[0])["choices"][0]["delta"]["content"] == "one ", body
    err = json.loads(events[1])["error"]
    assert err["code"] == 504 and "idle timeout" in err["message"] and events[2:] == ["[DONE]"], events
    assert IDLE_S - 0.05 <= took < IDLE_S + SLACK_S, took


# ----------------------------------------------------------------------------- no empty 200

@pytest.mark.parametrize("mode", ["empty", "drop"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_empty_200_of_the_engines_is_a_502(plain, mode, stream):
    """A decode answering 200 with nothing, or dropping the connection (the upstream's stream then ends its 200
    empty): the client gets 502 naming the decode backend, not the upstream's empty 200."""
    wrapper, _unused, _unused = plain
    before = wrapper.metrics()["a3_proxy_empty_200_blocked_total"]
    status, _unused, body, _unused = post(wrapper, chat(prompt("d=" + mode), stream))
    err = openai_error(status, body, 502, "BadGatewayError")
    assert "empty body" in err["message"] and "[last backend: the decode backend]" in err["message"], err
    assert LOCAL not in err["message"]
    assert wrapper.metrics()["a3_proxy_empty_200_blocked_total"] == before + 1


def test_a_prefill_that_drops_the_connection_is_a_502_naming_the_prefill(plain):
    """The upstream retries the prefill and then fails the request (its own 500): the client gets 502 naming the
    role, and the decode is never asked."""
    wrapper, p, d = plain
    text = prompt("p=drop")
    status, _unused, body, _unused = post(wrapper, chat(text))
    err = openai_error(status, body, 502, "BadGatewayError")
    assert "[last backend: the prefill backend]" in err["message"] and LOCAL not in err["message"], err
    assert len(p.tagged(tag_of(text))) == 3 and d.tagged(tag_of(text)) == []  # the upstream's --max-retries 3


# ----------------------------------------------------------------------------- streaming relay

def test_a_stream_is_relayed_as_it_comes(plain):
    """The decode holds its answer after the first event until the client has that event: the proxy relays it
    at once instead of collecting the answer."""
    wrapper, _unused, d = plain
    text = prompt("d=hold")
    chunks = []
    with wrapper.client.stream("POST", wrapper.base + "/v1/chat/completions", json=chat(text, stream=True)) as answer:
        assert answer.status_code == 200
        for chunk in answer.iter_raw():
            chunks.append(chunk)
            if b"one " in b"".join(chunks):
                d.release(tag_of(text))
    assert d.tagged(tag_of(text))[0]["released"] is True, "the first event reached the client only with the rest"
    events = sse_events(b"".join(chunks))
    assert [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-1]] == ["one ", "two"]
    assert events[-1] == "[DONE]"


# ----------------------------------------------------------------------------- keys and tokens

def test_the_public_listener_refuses_a_client_without_its_key(keyed):
    wrapper, p, d = keyed
    text = prompt()
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic " + CLIENT_KEY},
                    {"authorization": "Bearer " + ENGINE_KEY}, {"authorization": "Bearer " + ADMIN_TOKEN}):
        status, answer_headers, body, _unused = post(wrapper, chat(text), headers=headers)
        err = openai_error(status, body, 401, "invalid_request_error", "invalid_api_key")
        assert answer_headers["www-authenticate"] == "Bearer" and CLIENT_KEY not in err["message"], headers
    assert wrapper.client.get(wrapper.base + "/v1/models").status_code == 401
    assert p.tagged(tag_of(text)) == [] and d.tagged(tag_of(text)) == []
    # the public /healthcheck needs no key (load balancers probe it)
    answer = wrapper.client.get(wrapper.base + "/healthcheck")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


def test_a_client_key_lets_a_request_through_and_only_the_engines_key_reaches_them(keyed):
    wrapper, p, d = keyed
    text = prompt()
    status, _unused, body, _unused = post(wrapper, chat(text), headers={"authorization": "Bearer " + CLIENT_KEY})
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "hello", body
    calls = p.tagged(tag_of(text)) + d.tagged(tag_of(text))
    assert [c["auth"] for c in calls] == ["Bearer " + ENGINE_KEY] * 2
    models = wrapper.client.get(wrapper.base + "/v1/models", headers={"authorization": "Bearer " + CLIENT_KEY})
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "glm-5.1"


def test_the_admin_listener_needs_its_token(keyed):
    wrapper, _unused, _unused = keyed
    for path in ("/metrics", "/a3/backends"):
        for headers in ({}, {"authorization": "Bearer " + CLIENT_KEY}):
            answer = wrapper.client.get(wrapper.admin + path, headers=headers)
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key", path
    assert wrapper.client.get(wrapper.admin + "/healthcheck").status_code == 200
    assert wrapper.metrics()["a3_proxy_unauthorized_total"] >= 4


# ----------------------------------------------------------------------------- limits

def test_a_body_over_the_cap_is_a_413_before_anything_is_forwarded(plain):
    wrapper, p, d = plain
    text = prompt()
    body = chat(text)
    body["messages"][0]["content"] += " " + "x" * MAX_BODY
    status, headers, answer, _unused = post(wrapper, body)
    openai_error(status, answer, 413, "invalid_request_error", "request_too_large")
    assert headers["connection"] == "close"
    assert p.tagged(tag_of(text)) == [] and d.tagged(tag_of(text)) == []


def test_the_header_timeout_closes_a_slow_connection(plain):
    """uvicorn's own protocol, with the wrapper's header timeout: a client that never finishes its headers gets
    408 and the connection closes."""
    wrapper, _unused, _unused = plain
    with socket.create_connection((LOCAL, wrapper.port), timeout=10) as sock:
        began = time.monotonic()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: proxy\r\n")
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        took = time.monotonic() - began
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert HEADER_S - 0.05 <= took < HEADER_S + SLACK_S, took


def test_the_open_request_limit(plain):
    """With --a3-max-inflight 2 requests open, a third gets 503 with Retry-After at once."""
    wrapper, _unused, _unused = plain
    results = []

    def hung():
        results.append(post(wrapper, chat(prompt("d=headers")))[0])

    threads = [threading.Thread(target=hung) for _unused in range(MAX_INFLIGHT)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: wrapper.metrics()["a3_proxy_open_requests"] == MAX_INFLIGHT, 5, "two requests open")
        status, headers, body, took = post(wrapper, chat(prompt()))
        err = openai_error(status, body, 503, "ServiceUnavailableError")
        assert headers["retry-after"] == RETRY_AFTER and took < FIRST_BYTE_S
        assert err["message"] == "the proxy has 2 requests open, its limit; retry later"
    finally:
        for thread in threads:
            thread.join(15)
    assert results == [503, 503]  # the hung ones end with their first-byte timeout
    # a request leaves the count once the upstream request it started has unwound (not with its answer)
    wait_until(lambda: wrapper.metrics()["a3_proxy_open_requests"] == 0, 5, "no request open")
