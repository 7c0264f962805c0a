# -*- coding: utf-8 -*-
"""a3proxy.apps, answer by answer: every refusal of both listeners pinned whole (status, headers, OpenAI-style
body), with the counters and per-endpoint request counts each one books, driven in this process with a stand-in
core."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest
from a3proxy import apps, limits
from a3proxy.answers import send_json

from proxy_fakes import asgi, options

JSON = "application/json"


class Core(object):
    """The stand-in core: records the counters, the request counts and each call the listeners make."""

    def __init__(self, limit=4, health=(200, {"status": "ok"})):
        self.admission = limits.Admission(limit)
        self.retry_after = [(b"retry-after", b"7")]
        self.counters, self.requests, self.calls = {}, {}, []
        self.health = health
        self.fail_after_start = False

    def count(self, name, n=1):
        self.counters[name] = self.counters.get(name, 0) + n

    def count_request(self, endpoint, code):
        self.requests[(endpoint, code)] = self.requests.get((endpoint, code), 0) + 1

    def public_health(self):
        return self.health

    def full_health(self):
        return self.health

    def backends_answer(self):
        return [{"backend": "b:1"}]

    def metrics_text(self):
        return "m 1\n"

    async def drain(self, path, body, send):
        self.calls.append(("drain", path, body))
        await send_json(send, 200, {"drain": path})

    async def instances(self, scope, body, receive, send):
        self.calls.append(("instances", scope["path"], body))
        await send_json(send, 200, {"instances": scope["path"]})

    async def models(self, send):
        self.calls.append(("models",))
        await send_json(send, 200, {"models": self.admission.open})

    async def completion(self, scope, body, receive, send):
        self.calls.append(("completion", scope["path"], body))
        if self.fail_after_start:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise RuntimeError("after the start")
        await send_json(send, 200, {"open": self.admission.open})


OPTS = options(a3_max_body_bytes=100, a3_body_timeout=0.25)


def answer(app, method, path, body=b"", headers=(), **kw):
    """(status, [(header, value)], parsed JSON body) of one request."""
    status, _unused, raw, sent = asgi(app, method, path, body, headers, **kw)
    pairs = [(k.decode(), v.decode()) for k, v in sent[0]["headers"]]
    return status, pairs, json.loads(raw)


def refusal(status, message, code, etype="invalid_request_error", extra=()):
    body = {"error": {"message": message, "type": etype, "code": code}}
    length = len(json.dumps(body, ensure_ascii=False).encode())
    return status, [("content-type", JSON), ("content-length", str(length))] + list(extra), body


def public(core=None, keys=(), opts=OPTS):
    core = core or Core()
    return apps.PublicApp(core, opts, keys), core


def admin(core=None, token="", opts=OPTS):
    core = core or Core()
    return apps.AdminApp(core, opts, token), core


def test_the_routes():
    assert apps.PUBLIC_ROUTES == {"/v1/completions": "POST", "/v1/chat/completions": "POST", "/v1/models": "GET",
                                  "/healthcheck": "GET"}
    assert apps.ADMIN_ROUTES == {"/healthcheck": "GET", "/a3/backends": "GET", "/metrics": "GET",
                                 "/a3/drain": "POST", "/a3/undrain": "POST", "/instances/add": "POST",
                                 "/instances/remove": "POST"}
    assert apps.PublicApp.name == "public" and apps.AdminApp.name == "admin"


@pytest.mark.parametrize("make", [public, admin])
def test_an_unknown_path_is_a_404_naming_it(make):
    app, core = make()
    assert answer(app, "GET", "/nope") == refusal(404, "Invalid URL (GET /nope)", "unknown_url")
    long_path = "/" + "x" * 300
    assert answer(app, "DELETE", long_path) == refusal(404, "Invalid URL (DELETE %s)" % long_path[:200],
                                                       "unknown_url")
    assert core.counters == {"a3_proxy_not_found_total": 2} and core.requests == {} and core.calls == []


def test_a_scope_without_method_or_path():
    app, core = public()

    async def run():
        sent = []

        async def receive():
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
        await app({"type": "http"}, receive, send)
        return sent

    sent = asyncio.run(run())
    assert json.loads(sent[1]["body"]) == {"error": {"message": "Invalid URL (GET )", "type": "invalid_request_error",
                                                     "code": "unknown_url"}}
    assert core.counters == {"a3_proxy_not_found_total": 1}


@pytest.mark.parametrize("method, path, allowed, counted", [
    ("GET", "/v1/completions", "POST", {("/v1/completions", 405): 1}),
    ("PUT", "/v1/chat/completions", "POST", {("/v1/chat/completions", 405): 1}),
    ("POST", "/v1/models", "GET", {("/v1/models", 405): 1}),
    ("POST", "/healthcheck", "GET", {}),
])
def test_the_public_405_names_the_method_and_counts_the_endpoint(method, path, allowed, counted):
    app, core = public()
    assert answer(app, method, path) == refusal(
        405, "Method %s is not allowed for %s (%s only)" % (method, path, allowed), "method_not_allowed",
        extra=[("allow", allowed)])
    assert core.requests == counted and core.counters == {} and core.calls == []


@pytest.mark.parametrize("method, path, allowed", [
    ("GET", "/a3/drain", "POST"), ("POST", "/a3/backends", "GET"), ("PUT", "/metrics", "GET"),
    ("GET", "/instances/add", "POST"), ("POST", "/healthcheck", "GET")])
def test_the_admin_405_counts_no_endpoint(method, path, allowed):
    app, core = admin()
    assert answer(app, method, path) == refusal(
        405, "Method %s is not allowed for %s (%s only)" % (method, path, allowed), "method_not_allowed",
        extra=[("allow", allowed)])
    assert core.requests == {} and core.counters == {}


@pytest.mark.parametrize("path, counted", [("/v1/completions", {("/v1/completions", 401): 1}),
                                           ("/v1/models", {("/v1/models", 401): 1}), ("/nope", {})])
def test_the_public_401(path, counted):
    app, core = public(keys=["k1"])
    method = "POST" if path == "/v1/completions" else "GET"
    assert answer(app, method, path, b"{}", {"authorization": "Bearer k2"}) == refusal(
        401, 'missing or invalid API key: send the header "Authorization: Bearer <API key>"', "invalid_api_key",
        extra=[("www-authenticate", "Bearer")])
    assert core.counters == {"a3_proxy_unauthorized_total": 1} and core.requests == counted and core.calls == []


def test_the_admin_401():
    app, core = admin(token="tok")
    assert answer(app, "GET", "/metrics", headers={"authorization": "Bearer tok2"}) == refusal(
        401, 'missing or invalid admin token: send the header "Authorization: Bearer <admin token>"',
        "invalid_api_key", extra=[("www-authenticate", "Bearer")])
    assert core.counters == {"a3_proxy_unauthorized_total": 1} and core.requests == {}
    status, headers, raw, _unused = asgi(app, "GET", "/metrics", headers={"authorization": "Bearer tok"})
    assert (status, headers, raw) == (200, {"content-type": "text/plain; version=0.0.4; charset=utf-8",
                                            "content-length": "4"}, b"m 1\n")
    assert answer(app, "GET", "/a3/backends", headers={"authorization": "Bearer tok"}) == (
        200, [("content-type", JSON), ("content-length", "20")], [{"backend": "b:1"}])


def test_with_keys_a_key_is_needed_but_not_for_the_healthcheck():
    app, core = public(keys=["k1"])
    assert answer(app, "GET", "/healthcheck") == (200, [("content-type", JSON), ("content-length", "16")],
                                                  {"status": "ok"})
    assert answer(app, "POST", "/v1/completions", b"{}", {"authorization": "Bearer k1"})[2] == {"open": 1}
    app, core = admin(token="tok")
    assert answer(app, "GET", "/healthcheck")[0] == 200 and core.counters == {}


@pytest.mark.parametrize("make", [public, admin])
def test_the_healthcheck_503_carries_retry_after(make):
    body = {"status": "unavailable", "missing": ["decode"]}
    app, core = make(Core(health=(503, body)))
    length = str(len(json.dumps(body)))
    assert answer(app, "GET", "/healthcheck") == (
        503, [("content-type", JSON), ("content-length", length), ("retry-after", "7")], body)
    assert core.requests == {} and core.counters == {}


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("headers, message", [
    ({"content-length": "2x"}, "a malformed Content-Length in the request"),
    ([("content-length", "2"), ("content-length", "3")], "more than one Content-Length in the request")])
def test_a_bad_content_length_is_a_400_that_closes(path, headers, message):
    app, core = public()
    assert answer(app, "POST", path, b"{}", headers) == refusal(400, message, 400, "BadRequestError",
                                                                [("connection", "close")])
    assert core.requests == {(path, 400): 1} and core.counters == {} and core.calls == []


def test_the_body_cap_from_the_content_length():
    app, core = public()
    assert answer(app, "POST", "/v1/completions", chunks=[], hang_after=True, headers={"content-length": "101"}) == \
        refusal(413, "the request body has 101 bytes, more than the 100 this proxy accepts", "request_too_large",
                extra=[("connection", "close")])
    assert core.counters == {"a3_proxy_body_too_large_total": 1} and core.requests == {("/v1/completions", 413): 1}
    # a Content-Length at the limit is read
    assert answer(app, "POST", "/v1/completions", b"x" * 100, {"content-length": "100"})[2] == {"open": 1}
    assert core.calls == [("completion", "/v1/completions", b"x" * 100)]


def test_the_body_cap_while_reading():
    app, core = admin()
    assert answer(app, "POST", "/a3/drain", chunks=[b"x" * 50, b"y" * 51]) == refusal(
        413, "the request body is longer than the 100 bytes this proxy accepts", "request_too_large",
        extra=[("connection", "close")])
    assert core.counters == {"a3_proxy_body_too_large_total": 1} and core.requests == {} and core.calls == []


def test_the_body_timeout_names_the_seconds():
    app, core = public()
    assert answer(app, "POST", "/v1/chat/completions", chunks=[b"{"], hang_after=True) == refusal(
        408, "the request body did not come within 0.25s", "request_timeout", extra=[("connection", "close")])
    assert core.counters == {"a3_proxy_body_timeouts_total": 1} and core.requests == {("/v1/chat/completions", 408): 1}


def _disconnecting(app, path):
    sent = []
    messages = [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "http", "method": "POST", "path": path, "headers": []}, receive, send))
    return sent


def test_a_client_that_leaves_while_sending_its_body_gets_nothing():
    app, core = public()
    assert _disconnecting(app, "/v1/completions") == []
    assert core.requests == {("/v1/completions", 499): 1} and core.calls == [] and core.admission.open == 0
    app, core = admin()
    assert _disconnecting(app, "/a3/drain") == []
    assert core.requests == {} and core.counters == {} and core.calls == []


def test_the_open_request_limit_refuses_with_503():
    core = Core(limit=1)
    core.admission.enter()
    app, _unused = public(core)
    assert answer(app, "POST", "/v1/completions", b"{}") == refusal(
        503, "the proxy has 1 requests open, its limit; retry later", 503, "ServiceUnavailableError",
        [("retry-after", "7")])
    assert core.counters == {"a3_proxy_busy_total": 1} and core.requests == {("/v1/completions", 503): 1}
    assert core.calls == [] and core.admission.open == 1


def test_a_served_request_holds_one_admission_while_it_runs():
    app, core = public()
    assert answer(app, "GET", "/v1/models")[2] == {"models": 1}
    assert answer(app, "POST", "/v1/completions", b"{}")[2] == {"open": 1}
    assert core.admission.open == 0 and core.calls == [("models",), ("completion", "/v1/completions", b"{}")]


@pytest.mark.parametrize("path", ["/a3/drain", "/a3/undrain", "/instances/add", "/instances/remove"])
def test_the_admin_posts_go_to_the_core_with_their_body(path):
    app, core = admin()
    kind = "drain" if path.startswith("/a3/") else "instances"
    assert answer(app, "POST", path, b'{"x": 1}')[2] == {kind: path}
    assert core.calls == [(kind, path, b'{"x": 1}')]


def test_a_failure_before_the_answer_is_a_500_and_logged(caplog):
    class Failing(Core):
        async def models(self, send):
            raise RuntimeError("boom")

    app, core = public(Failing())
    with caplog.at_level(logging.ERROR, logger="a3_proxy"):
        assert answer(app, "GET", "/v1/models") == refusal(
            500, "the proxy failed to answer this request; see its log", 500, "InternalServerError")
    assert [r.getMessage() for r in caplog.records] == ["public listener: GET /v1/models failed"]
    assert core.admission.open == 0


def test_a_failure_after_the_answer_started_adds_nothing(caplog):
    core = Core()
    core.fail_after_start = True
    app, _unused = public(core)
    with caplog.at_level(logging.ERROR, logger="a3_proxy"):
        _unused, _unused, raw, sent = asgi(app, "POST", "/v1/completions", b"{}")
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}] and raw == b""
    assert [r.getMessage() for r in caplog.records] == ["public listener: POST /v1/completions failed"]


def test_the_lifespan_websocket_and_other_scopes():
    app, _unused = admin()
    sent = []
    messages = [{"type": "lifespan.other"}, {"type": "lifespan.startup"}, {"type": "lifespan.shutdown"},
                {"type": "lifespan.startup"}]

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "lifespan"}, receive, send))
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
    assert messages == [{"type": "lifespan.startup"}]  # it returned after the shutdown
    asyncio.run(app({"type": "websocket", "path": "/a3/drain"}, receive, send))
    assert sent[2:] == [{"type": "websocket.close", "code": 1008}]
    assert asyncio.run(app({"type": "telepathy"}, receive, send)) is None and len(sent) == 3


def test_the_listener_base():
    base = apps.Listener(Core(), OPTS)
    assert base.routes == {} and base.name == "listener" and base.endpoint("/v1/completions") is None
    with pytest.raises(NotImplementedError):
        asyncio.run(base.handle({}, None, None))
    assert public()[0].endpoint("/v1/models") == "/v1/models"
    assert public()[0].endpoint("/healthcheck") is None and admin()[0].endpoint("/v1/completions") is None


def _bare(app, method, path, body=b"{}"):
    """A request whose scope carries no headers at all."""
    sent = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "http", "method": method, "path": path}, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_a_scope_without_headers():
    app, core = public()
    assert _bare(app, "POST", "/v1/completions") == (200, {"open": 1})
    assert core.calls == [("completion", "/v1/completions", b"{}")]
    app, core = public(keys=["k1"])
    assert _bare(app, "GET", "/v1/models")[0] == 401
    app, core = admin(token="tok")
    assert _bare(app, "POST", "/a3/drain")[0] == 401
    app, core = admin()
    assert _bare(app, "POST", "/a3/undrain") == (200, {"drain": "/a3/undrain"})


def _scope_only(app, scope):
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(dict({"type": "http"}, **scope), receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_the_admin_listener_defaults_a_scope_to_get_and_no_path():
    app, core = admin(Core(health=(200, {"status": "ok", "full": True})))
    assert _scope_only(app, {"path": "/healthcheck"}) == (200, {"status": "ok", "full": True})
    assert _scope_only(app, {}) == (404, {"error": {"message": "Invalid URL (GET )", "type": "invalid_request_error",
                                                    "code": "unknown_url"}})
    app, _unused = public()
    assert _scope_only(app, {"path": "/healthcheck"}) == (200, {"status": "ok"})


@pytest.mark.parametrize("make, secret", [(public, {"keys": ["k1"]}), (admin, {"token": "tok"})])
def test_another_method_on_the_healthcheck_needs_no_key(make, secret):
    app, core = make(**secret)
    assert answer(app, "POST", "/healthcheck") == refusal(
        405, "Method POST is not allowed for /healthcheck (GET only)", "method_not_allowed", extra=[("allow", "GET")])
    assert core.counters == {}
