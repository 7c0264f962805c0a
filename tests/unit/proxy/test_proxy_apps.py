# -*- coding: utf-8 -*-
"""a3proxy.apps: the public and the admin listener (routing, keys and token, body cap and timeout, the
open-request limit), driven with a stand-in core."""
from __future__ import annotations

import asyncio
import json

import pytest
from a3proxy import apps, limits
from a3proxy.answers import send_json

from proxy_fakes import asgi, options

KEYS = ("key-one", "key-two")
TOKEN = "admin-token-x"


class FakeCore(object):
    """What the listeners ask of HonestProxy; every call is recorded."""

    def __init__(self, limit=8, block=False):
        self.admission = limits.Admission(limit)
        self.retry_after = [(b"retry-after", b"7")]
        self.counters, self.requests, self.calls = {}, {}, []
        self.block = asyncio.Event() if block else None
        self.fail = False

    def count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def count_request(self, endpoint, code):
        self.requests[(endpoint, str(code))] = self.requests.get((endpoint, str(code)), 0) + 1

    def public_health(self):
        return 200, {"status": "ok"}

    def full_health(self):
        return 503, {"status": "unavailable", "message": "decode 10.0.0.2:2 down"}

    def backends_answer(self):
        return [{"backend": "10.0.0.2:2"}]

    def metrics_text(self):
        return "a3_proxy_busy_total 0\n"

    async def drain(self, path, body, send):
        self.calls.append((path, body))
        await send_json(send, 200, {"drained": []})

    async def instances(self, scope, body, receive, send):
        self.calls.append((scope["path"], body, "receive" if callable(receive) else receive))
        await send_json(send, 200, {"message": "ok"})

    async def models(self, send):
        self.calls.append(("/v1/models", None))
        await send_json(send, 200, {"object": "list", "data": []})

    async def completion(self, scope, body, receive, send):
        self.calls.append((scope["path"], body))
        if self.fail:
            raise RuntimeError("boom at 10.0.0.2:2")
        if self.block is not None:
            await self.block.wait()
        await send_json(send, 200, {"choices": [{"text": "hi"}]})


OPTS = options(a3_max_body_bytes=100, a3_body_timeout=0.3)


def public(core=None, keys=()):
    core = core or FakeCore()
    return apps.PublicApp(core, OPTS, keys), core


def admin(core=None, token=""):
    core = core or FakeCore()
    return apps.AdminApp(core, OPTS, token), core


def error_of(status, body, want_status, code):
    assert status == want_status, body
    err = json.loads(body)["error"]
    assert err["code"] == code and err["type"] and err["message"]
    return err


@pytest.mark.parametrize("method, path", [
    ("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/redoc"), ("GET", "/docs/oauth2-redirect"),
    ("GET", "/a3/backends"), ("GET", "/metrics"), ("POST", "/a3/drain"), ("POST", "/a3/undrain"),
    ("POST", "/instances/add"), ("POST", "/instances/remove"), ("GET", "/"), ("GET", "/v1/embeddings")])
def test_the_public_listener_has_no_admin_path(method, path):
    app, core = public()
    status, _unused, body, _unused = asgi(app, method, path, b"{}")
    err = error_of(status, body, 404, "unknown_url")
    assert err["message"] == "Invalid URL (%s %s)" % (method, path)
    assert core.calls == [] and core.counters == {"a3_proxy_not_found_total": 1}


@pytest.mark.parametrize("method, path, allowed", [
    ("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"), ("POST", "/v1/models", "GET"),
    ("POST", "/healthcheck", "GET"), ("HEAD", "/healthcheck", "GET")])
def test_the_public_listener_refuses_another_method(method, path, allowed):
    app, core = public()
    status, headers, body, _unused = asgi(app, method, path)
    error_of(status, body, 405, "method_not_allowed")
    assert headers["allow"] == allowed and core.calls == []


def test_the_public_listener_serves_the_client_paths():
    app, core = public()
    assert asgi(app, "GET", "/healthcheck")[:3:2] == (200, b'{"status": "ok"}')
    assert asgi(app, "POST", "/v1/completions", b'{"a": 1}')[0] == 200
    assert asgi(app, "POST", "/v1/chat/completions", b'{"b": 2}')[0] == 200
    assert asgi(app, "GET", "/v1/models")[0] == 200
    assert core.calls == [("/v1/completions", b'{"a": 1}'), ("/v1/chat/completions", b'{"b": 2}'), ("/v1/models", None)]
    assert core.admission.open == 0


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer key-three"}, {"authorization": "Basic key-one"},
                                     {"authorization": "key-one"}, {"authorization": "Bearer " + TOKEN},
                                     {"x-api-key": "key-one"}])
def test_client_keys(headers):
    app, core = public(keys=KEYS)
    for method, path in (("POST", "/v1/completions"), ("GET", "/v1/models"), ("GET", "/docs"),
                         ("POST", "/instances/add")):
        status, answer_headers, body, _unused = asgi(app, method, path, b"{}", headers)
        err = error_of(status, body, 401, "invalid_api_key")
        assert err["type"] == "invalid_request_error" and answer_headers["www-authenticate"] == "Bearer"
        assert not any(k.encode() in body for k in KEYS + (TOKEN, "key-three"))
    assert core.calls == [] and core.counters["a3_proxy_unauthorized_total"] == 4
    assert core.requests == {("/v1/completions", "401"): 1, ("/v1/models", "401"): 1}
    assert asgi(app, "GET", "/healthcheck", headers=headers)[0] == 200  # no key needed


def test_a_client_key_lets_a_request_through():
    app, core = public(keys=KEYS)
    for key in KEYS:
        assert asgi(app, "POST", "/v1/completions", b"{}", {"authorization": "Bearer " + key})[0] == 200
    assert asgi(app, "GET", "/docs", headers={"authorization": "Bearer key-one"})[0] == 404
    assert len(core.calls) == 2


def test_the_body_cap_from_content_length_reads_nothing():
    app, core = public()
    # the client waits for an answer before it sends its body (Expect: 100-continue): 413 at once, nothing read
    status, headers, body, _unused = asgi(app, "POST", "/v1/completions", chunks=[], hang_after=True,
                                          headers={"content-length": "101"})
    error_of(status, body, 413, "request_too_large")
    assert headers["connection"] == "close" and core.calls == []
    assert core.counters["a3_proxy_body_too_large_total"] == 1 and core.requests == {("/v1/completions", "413"): 1}


def test_the_body_cap_while_a_chunked_body_is_read():
    app, core = public()
    status, headers, body, _unused = asgi(app, "POST", "/v1/completions", chunks=[b"x" * 60, b"y" * 41, b"z"])
    error_of(status, body, 413, "request_too_large")
    assert headers["connection"] == "close" and core.calls == []
    status, _unused, _unused, _unused = asgi(app, "POST", "/v1/completions", chunks=[b"x" * 60, b"y" * 40])
    assert status == 200 and core.calls == [("/v1/completions", b"x" * 60 + b"y" * 40)]  # the limit itself is fine


def test_a_malformed_content_length_is_a_400():
    app, core = public()
    status, _unused, body, _unused = asgi(app, "POST", "/v1/completions", b"{}", {"content-length": "2x"})
    error_of(status, body, 400, 400)
    assert core.calls == []


def test_the_body_timeout():
    app, core = public()
    status, headers, body, _unused = asgi(app, "POST", "/v1/completions", chunks=[b'{"a":'], hang_after=True)
    error_of(status, body, 408, "request_timeout")
    assert headers["connection"] == "close" and core.calls == []
    assert core.counters["a3_proxy_body_timeouts_total"] == 1


def test_the_open_request_limit():
    core = FakeCore(limit=2, block=True)
    app, _unused = public(core)
    answers = []

    async def run():
        async def one(path, method="POST"):
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"{}", "more_body": False}

            async def send(message):
                sent.append(message)
            await app({"type": "http", "method": method, "path": path, "headers": []}, receive, send)
            answers.append((path, sent[0]["status"], dict(sent[0]["headers"])))

        held = [asyncio.ensure_future(one("/v1/completions")) for _unused in range(2)]
        await asyncio.sleep(0.05)
        assert core.admission.open == 2
        await one("/v1/chat/completions")
        await one("/v1/models", "GET")
        await one("/healthcheck", "GET")  # not counted, never refused
        core.block.set()
        await asyncio.gather(*held)
        await one("/v1/completions")

    asyncio.run(run())
    assert [(p, s) for p, s, _unused in answers] == [
        ("/v1/chat/completions", 503), ("/v1/models", 503), ("/healthcheck", 200), ("/v1/completions", 200),
        ("/v1/completions", 200), ("/v1/completions", 200)]
    assert answers[0][2][b"retry-after"] == b"7" and core.counters["a3_proxy_busy_total"] == 2
    assert core.admission.open == 0


def test_a_failure_of_the_core_is_a_500_without_details():
    core = FakeCore()
    core.fail = True
    app, _unused = public(core)
    status, _unused, body, _unused = asgi(app, "POST", "/v1/completions", b"{}")
    err = error_of(status, body, 500, 500)
    assert "10.0.0.2" not in err["message"] and core.admission.open == 0


def test_the_listeners_answer_a_lifespan_and_close_a_websocket():
    app, _unused = public()
    sent, messages = [], [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message["type"])

    asyncio.run(app({"type": "lifespan"}, receive, send))
    asyncio.run(app({"type": "websocket", "path": "/v1/completions"}, receive, send))
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete", "websocket.close"]


def test_the_admin_listener():
    app, core = admin()
    status, _unused, body, _unused = asgi(app, "GET", "/healthcheck")
    assert status == 503 and b"10.0.0.2:2" in body  # the full one, with the addresses
    assert asgi(app, "GET", "/a3/backends")[2] == b'[{"backend": "10.0.0.2:2"}]'
    status, headers, body, _unused = asgi(app, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain") and body == b"a3_proxy_busy_total 0\n"
    for path in ("/a3/drain", "/a3/undrain", "/instances/add", "/instances/remove"):
        assert asgi(app, "POST", path, b'{"x": 1}')[0] == 200
    assert core.calls == [("/a3/drain", b'{"x": 1}'), ("/a3/undrain", b'{"x": 1}'),
                          ("/instances/add", b'{"x": 1}', "receive"), ("/instances/remove", b'{"x": 1}', "receive")]
    for method, path in (("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/redoc"), ("POST", "/v1/completions"),
                         ("GET", "/v1/models")):
        error_of(*asgi(app, method, path)[:3:2], 404, "unknown_url")
    status, headers, body, _unused = asgi(app, "GET", "/a3/drain")
    error_of(status, body, 405, "method_not_allowed")
    assert headers["allow"] == "POST"
    status, _unused, body, _unused = asgi(app, "POST", "/a3/drain", b"x" * 101)
    error_of(status, body, 413, "request_too_large")


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong"}, {"authorization": "Bearer key-one"},
                                     {"authorization": TOKEN}])
def test_the_admin_token(headers):
    app, core = admin(token=TOKEN)
    for method, path in (("GET", "/a3/backends"), ("GET", "/metrics"), ("POST", "/a3/drain"),
                         ("POST", "/instances/add"), ("GET", "/docs")):
        status, answer_headers, body, _unused = asgi(app, method, path, b"{}", headers)
        error_of(status, body, 401, "invalid_api_key")
        assert answer_headers["www-authenticate"] == "Bearer" and TOKEN.encode() not in body
    assert core.calls == []
    assert asgi(app, "GET", "/healthcheck", headers=headers)[0] == 503  # answered without the token
    good = {"authorization": "Bearer " + TOKEN}
    assert asgi(app, "GET", "/a3/backends", headers=good)[0] == 200
    assert asgi(app, "POST", "/a3/drain", b"{}", good)[0] == 200 and core.calls == [("/a3/drain", b"{}")]
