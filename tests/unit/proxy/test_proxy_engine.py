# -*- coding: utf-8 -*-
"""a3proxy.engine: the hooks on the upstream's backend clients, one request run through an ASGI app."""
from __future__ import annotations

import asyncio
import contextvars
import json
import sys
import types

import pytest
from a3proxy import engine

from proxy_fakes import fake_upstream


class Headers(dict):
    """Case-insensitive enough for the hooks, as httpx.Headers."""

    def __setitem__(self, key, value):
        dict.__setitem__(self, key.lower(), value)

    def __getitem__(self, key):
        return dict.__getitem__(self, key.lower())

    def get(self, key, default=None):
        return dict.get(self, key.lower(), default)

    def pop(self, key, *default):
        return dict.pop(self, key.lower(), *default)


def request(path="/v1/completions", host="10.0.0.2", port=2, headers=None):
    url = types.SimpleNamespace(host=host, port=port, scheme="http", path=path)
    hdrs = Headers()
    for k, v in (headers or {}).items():
        hdrs[k] = v
    return types.SimpleNamespace(url=url, headers=hdrs, method="POST")


def response(status, body=b"", req=None, ctype="application/json"):
    async def aiter_bytes():
        for i in range(0, len(body), 7):
            yield body[i:i + 7]
    return types.SimpleNamespace(status_code=status, request=req or request(), headers={"content-type": ctype},
                                 aiter_bytes=aiter_bytes)


def in_request(coro_fn):
    """Run coro_fn(state) as the upstream would, inside a client request (its own context)."""
    def run():
        state = engine.RequestState()
        state.activate()
        return state, asyncio.run(coro_fn(state))
    return contextvars.copy_context().run(run)


@pytest.mark.parametrize("key, given, want", [
    ("bk", "Bearer None", "Bearer bk"),          # the upstream's header without OPENAI_API_KEY
    ("bk", "Bearer client-key", "Bearer bk"),
    ("", "Bearer None", None),                    # never "Bearer None"
    ("", "Bearer client-key", None),
    ("", None, None),
])
def test_the_request_hook_owns_the_authorization_header(key, given, want):
    on_request, _unused = engine.make_hooks(key)
    req = request(headers={"Authorization": given} if given else {})
    asyncio.run(on_request(req))
    assert req.headers.get("authorization") == want


def test_the_hooks_trace_the_backends_of_a_request():
    on_request, on_response = engine.make_hooks("")

    async def flow(state):
        first = request(host="10.0.0.1", port=1, headers={"X-Request-Id": "r1"})
        await on_request(first)
        await on_response(response(200, req=first))
        second = request(host="10.0.0.2", port=2, headers={"X-Request-Id": "r1"})
        await on_request(second)

    state, _unused = in_request(flow)
    assert state.trace == [{"backend": "10.0.0.1:1", "status": 200}, {"backend": "10.0.0.2:2", "status": None}]
    assert state.request_ids == {"10.0.0.1:1": {"r1"}, "10.0.0.2:2": {"r1"}}
    # outside a client request (the prober, /instances/add's check) nothing is traced and nothing raised
    asyncio.run(on_request(request()))
    asyncio.run(on_response(response(404, b'{"detail": "Not Found"}', request(path="/v1/models"))))


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422, 429])
def test_a_4xx_to_a_completion_escapes_as_backend_answer(status):
    _unused, on_response = engine.make_hooks("")
    body = json.dumps({"error": {"message": "max_tokens must be at least 1", "code": status}}).encode()

    async def flow(state):
        with pytest.raises(engine.BackendAnswer) as err:
            await on_response(response(status, body, request(path="/v1/chat/completions")))
        return err.value

    _unused, answer = in_request(flow)
    assert (answer.status, answer.body, answer.backend) == (status, body, "10.0.0.2:2")
    assert not isinstance(answer, Exception)  # so the upstream's "except Exception" retry loops let it pass


@pytest.mark.parametrize("status, path", [(200, "/v1/completions"), (500, "/v1/completions"),
                                          (503, "/v1/chat/completions"), (404, "/v1/models")])
def test_other_answers_are_left_to_the_upstream(status, path):
    _unused, on_response = engine.make_hooks("")

    async def flow(state):
        await on_response(response(status, b"{}", request(path=path)))

    in_request(flow)


def test_a_huge_4xx_body_is_cut(monkeypatch):
    monkeypatch.setattr(engine, "BACKEND_ERROR_CAP", 20)
    _unused, on_response = engine.make_hooks("")

    async def flow(state):
        with pytest.raises(engine.BackendAnswer) as err:
            await on_response(response(400, b"x" * 1000))
        return err.value

    assert len(in_request(flow)[1].body) == 20


def test_install_hooks_covers_every_server_the_upstream_makes():
    module = fake_upstream()
    engine.install_hooks(module, "bk")
    engine.install_hooks(module, "bk")  # twice: still one pair of hooks
    server = module.ServerState("10.0.0.9", 9)
    assert len(server.client.event_hooks["request"]) == 1 and len(server.client.event_hooks["response"]) == 1
    req = request(headers={"Authorization": "Bearer None"})
    asyncio.run(server.client.event_hooks["request"][0](req))
    assert req.headers.get("authorization") == "Bearer bk"


def test_find_exception_looks_into_groups_and_causes():
    answer = engine.BackendAnswer(400, b"{}", "application/json", "h:1")
    assert engine.find_exception(answer, engine.BackendAnswer) is answer
    try:
        try:
            raise answer
        except engine.BackendAnswer as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert engine.find_exception(wrapped, engine.BackendAnswer) is answer
    if sys.version_info >= (3, 11):
        group = BaseExceptionGroup("g", [ValueError("x"), BaseExceptionGroup("inner", [answer])])  # noqa: F821
        assert engine.find_exception(group, engine.BackendAnswer) is answer
    assert engine.find_exception(ValueError("x"), engine.BackendAnswer) is None
    assert engine.find_exception(None, engine.BackendAnswer) is None


def test_status_error_answer_and_exc_text():
    answer = engine.BackendAnswer(400, b'{"error": {"message": "bad"}}', "application/json", "h:1")
    assert engine.status_error_answer(answer) == (400, b'{"error": {"message": "bad"}}')
    assert engine.exc_text(answer) == "backend answered HTTP 400: bad"
    err = ConnectionError("All connection attempts failed\nmore")
    err._request = types.SimpleNamespace(method="POST", url="http://10.0.0.2:2/v1/completions")
    assert engine.exc_text(err) == ("ConnectionError: All connection attempts failed "
                                    "(POST http://10.0.0.2:2/v1/completions)")
    assert engine.exc_text(err, where=False) == "ConnectionError: All connection attempts failed"
    assert engine.status_error_answer(ValueError("x")) is None


def test_forward_scope_drops_the_clients_credentials():
    scope = {"type": "http", "headers": [(b"authorization", b"Bearer client"), (b"content-length", b"99"),
                                         (b"content-type", b"application/json")], "asgi": {"version": "3.0"}}
    forwarded = engine.forward_scope(scope, b"12345")
    assert forwarded["headers"] == [(b"content-type", b"application/json"), (b"content-length", b"5")]
    assert forwarded["asgi"] == {"version": "3.0", "spec_version": "2.3"}
    assert scope["headers"][0] == (b"authorization", b"Bearer client")  # the client's scope is left as it was


def test_upstream_collects_an_app_answer_and_its_failure():
    async def app(scope, receive, send):
        message = await receive()
        assert message["body"] == b"{}" and scope["headers"][-1] == (b"content-length", b"2")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise engine.BackendAnswer(400, b"bad", "text/plain", "h:1")

    async def never():
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"{}", never)
        got = [await up.get(1), await up.get(1)]
        assert await up.close()
        return got

    (start, failure) = asyncio.run(run())
    assert start[0] == "msg" and start[1]["status"] == 200
    assert failure[0] == "exc" and isinstance(failure[1], engine.BackendAnswer)


def test_upstream_close_ends_a_hung_app_as_a_disconnect():
    seen = []

    async def app(scope, receive, send):
        await receive()
        seen.append((await receive())["type"])  # what a hung backend's request waits on
        try:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        except OSError:
            seen.append("send refused")

    async def never():
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"{}", never)
        with pytest.raises(asyncio.TimeoutError):
            await up.get(0.05)
        assert await up.close(grace=1)
        return up

    up = asyncio.run(run())
    assert seen == ["http.disconnect", "send refused"] and not up.client_gone


def test_a_queued_message_is_taken_without_waiting_even_at_a_spent_deadline():
    """get() takes what is already queued at once: a timeout of 0 (the first-byte deadline just spent) still gets
    it, and an empty queue still times out."""
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(3600)

    async def never():
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"{}", never)
        while up.queue.empty():
            await asyncio.sleep(0.001)
        got = await up.get(0)
        with pytest.raises(asyncio.TimeoutError):
            await up.get(0)
        assert await up.close(grace=1)
        return got

    kind, message = asyncio.run(run())
    assert kind == "msg" and message["status"] == 200


def test_a_backends_requests_take_turns_among_the_pools_with_the_upstreams_url_and_timeout():
    import httpx
    handled = []

    def make_transport():
        number = len(made)
        made.append(number)
        return httpx.MockTransport(lambda request: handled.append((number, str(request.url))) or httpx.Response(200))

    made = []
    original = httpx.AsyncClient(base_url="http://10.0.0.9:8000/v1", timeout=7.5)
    client = engine.sharded_client(original, shards=3, make_transport=make_transport)
    assert client is not original and client.base_url == original.base_url and client.timeout == httpx.Timeout(7.5)

    async def send(count):
        for _request in range(count):
            await client.post("/completions", json={})
        await client.aclose()

    asyncio.run(send(7))
    assert made == [0, 1, 2]
    assert handled == [(i % 3, "http://10.0.0.9:8000/v1/completions") for i in range(7)]
    assert engine.POOL_SHARDS == 8


def test_a_client_that_is_not_httpxs_is_left_as_it_is():
    fake = object()
    assert engine.sharded_client(fake) is fake
