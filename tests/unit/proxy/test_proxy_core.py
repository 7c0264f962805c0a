# -*- coding: utf-8 -*-
"""a3proxy.core: the upstream's load counts released whatever way a request ends, and what a client gets for
each way an upstream request can go (a stand-in upstream app, asyncio only)."""
from __future__ import annotations

import asyncio
import contextvars
import json
import time

import pytest
from a3proxy import auth, core, engine

from proxy_fakes import fake_upstream, options

SECRETS = auth.Secrets((), "", "")


def make(app=None, prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), **opts):
    up = fake_upstream(prefills, decodes, app)
    proxy = core.HonestProxy(up, options(**opts), SECRETS)
    proxy._pin_selection()
    for backend in proxy.backends.values():
        backend.observe(True, "HTTP 200", 0.0)
    return proxy, up.proxy_state


def loads(state):
    return [(str(s), s.active_tokens, s.active_kv_cache) for s in state.prefillers + state.decoders]


def in_request(fn):
    """fn(request state) inside a client request of its own (its own context), as the upstream's tasks run."""
    def run():
        request = engine.RequestState()
        request.activate()
        return request, fn(request)
    return contextvars.copy_context().run(run)


def test_a_request_that_ends_well_leaves_nothing_to_release():
    proxy, state = make()

    def upstream_success(request):
        p = state.select_prefiller(120.0)
        state.release_prefiller(p, 120.0)
        d = state.select_decoder(50.0)
        state.release_prefiller_kv(p, 120.0)
        state.release_decoder(d, 50.0)

    request, _unused = in_request(upstream_success)
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]
    proxy._settle(request, aborted=False)
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]
    assert proxy.counters.get("a3_proxy_load_released_total", 0) == 0


def test_what_a_failed_request_left_is_released_at_its_end_and_its_prefill_kv_aborted():
    proxy, state = make()

    def upstream_cut(request):
        state.select_prefiller(120.0)  # the prefill failed: the upstream releases nothing
        request.request_ids["10.0.0.1:1"] = {"rid-1"}

    request, _unused = in_request(upstream_cut)
    assert loads(state)[0] == ("10.0.0.1:1", 120.0, 120.0)
    proxy.open.add(request)
    assert [s["inflight_requests"] for s in proxy.snapshots()] == [1, 0]
    proxy._settle(request, aborted=True)
    proxy.open.discard(request)
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]
    assert state.aborted == [("10.0.0.1:1", "rid-1")]
    assert proxy.counters["a3_proxy_load_released_total"] == 1
    assert all(s["outstanding_load"] == 0 and s["inflight_requests"] == 0 for s in proxy.snapshots())


def test_a_stream_cut_after_its_first_byte_releases_the_decode_without_an_abort():
    proxy, state = make()

    def upstream_stream_cut(request):
        p = state.select_prefiller(120.0)
        state.release_prefiller(p, 120.0)
        state.select_decoder(50.0)
        state.release_prefiller_kv(p, 120.0)  # the first chunk came; then the stream was cut
        request.request_ids["10.0.0.1:1"] = {"rid-2"}

    request, _unused = in_request(upstream_stream_cut)
    proxy._settle(request, aborted=False)
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)] and state.aborted == []


def test_kv_the_upstream_never_released_after_a_good_answer_is_released_without_an_abort():
    """Its "recomputed" retry selects a second prefill and never releases that one's KV count; the decode did pull
    the KV, so the prefill is not told to drop it."""
    proxy, state = make()

    def upstream(request):
        p = state.select_prefiller(120.0)
        state.release_prefiller(p, 120.0)
        request.request_ids["10.0.0.1:1"] = {"rid-3"}

    request, _unused = in_request(upstream)
    proxy._settle(request, aborted=False)
    assert loads(state)[0] == ("10.0.0.1:1", 0.0, 0.0) and state.aborted == []


def test_a_release_by_a_stale_index_goes_to_the_server_the_request_booked():
    """The upstream releases by list index; a backend that left the list meanwhile shifts the others."""
    proxy, state = make(decodes=(("10.0.0.2", 2), ("10.0.0.3", 3)))
    state.decoders[0].active_tokens = 500.0  # busy: the request goes to the second decode

    def upstream(request):
        d = state.select_decoder(50.0)
        assert d == 1
        state.remove_decoders([state.decoders[0]])  # the prober took the first one out
        state.release_decoder(d, 50.0)  # index 1: past the list's end now

    in_request(upstream)
    assert state.decoders[0].host == "10.0.0.3" and state.decoders[0].active_tokens == 0.0


def test_a_release_after_the_settle_is_not_counted_twice():
    proxy, state = make()

    def booked(request):
        state.select_decoder(50.0)

    request, _unused = in_request(booked)
    proxy._settle(request, aborted=False)

    def late(_unused):
        state.release_decoder(0, 50.0)  # the upstream's own release, after the request ended

    contextvars.copy_context().run(lambda: (request.activate(), late(request)))
    assert state.decoders[0].active_tokens == 0.0


def test_a_release_outside_a_client_request_is_the_upstreams_own():
    _unused, state = make()
    state.decoders[0].active_tokens = 10.0
    contextvars.copy_context().run(lambda: state.release_decoder(0, 4.0))
    assert state.decoders[0].active_tokens == 6.0


def test_a_drained_backend_is_skipped_and_the_booking_kept():
    proxy, state = make(decodes=(("10.0.0.2", 2), ("10.0.0.3", 3)))
    proxy.drained.add("10.0.0.2:2")
    request, index = in_request(lambda request: state.select_decoder(30.0))
    assert index == 1 and state.decoders[1].active_tokens == 30.0 and state.decoders[0].active_tokens == 0.0
    assert request.ledger.backends() == {"10.0.0.3:3"}
    proxy._settle(request, aborted=False)
    assert state.decoders[1].active_tokens == 0.0


# ----------------------------------------------------------------------------- completions through a stand-in app

def sse(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


CHUNK = sse({"choices": [{"index": 0, "text": "part"}]})
ANSWER = json.dumps({"choices": [{"index": 0, "text": "hi"}], "usage": {"completion_tokens": 1}}).encode()


def stand_in(behaviour, seen):
    """An upstream ASGI app: books a prefill and a decode like the upstream (the trace as its clients' hooks write
    it), then behaves. It waits the way starlette does, on receive(), which says when the wrapper gave up."""
    async def app(scope, receive, send):
        seen.append(json.loads((await receive())["body"]))
        state, trace = app.state, engine.current_request().trace
        p = state.select_prefiller(100.0)
        trace.append({"backend": "10.0.0.1:1", "status": 400 if behaviour == "prefill_400" else 200})
        if behaviour == "prefill_400":
            raise engine.BackendAnswer(400, b'{"object": "error", "message": "bad 10.0.0.1:1"}', "application/json",
                                       "10.0.0.1:1")
        state.release_prefiller(p, 100.0)
        state.select_decoder(10.0)
        trace.append({"backend": "10.0.0.2:2", "status": None if behaviour in ("hang", "stall") else 200})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x")]})
        if behaviour == "decode_400":
            raise engine.BackendAnswer(400, b'{"error": {"message": "max_tokens must be at least 1"}}',
                                       "application/json", "10.0.0.2:2")
        if behaviour == "empty":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if behaviour == "hang":
            await receive()
            return
        if behaviour == "blank":  # keep-alive blanks, then nothing
            for blank in (b"\n\n", b" \r\n", b""):
                await send({"type": "http.response.body", "body": blank, "more_body": True})
            await receive()
            return
        state.release_prefiller_kv(p, 100.0)
        if behaviour in ("stall_stream", "stall"):
            await send({"type": "http.response.body", "body": CHUNK if behaviour == "stall_stream" else b'{"cho',
                        "more_body": True})
            await receive()
            return
        await send({"type": "http.response.body", "body": ANSWER, "more_body": False})
        state.release_decoder(0, 10.0)
    return app


def complete(behaviour, body=None, **opts):
    seen = []
    app = stand_in(behaviour, seen)
    proxy, state = make(app, a3_first_byte_timeout=0.3, a3_idle_timeout=0.2, **opts)
    app.state = state
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        await asyncio.sleep(3600)

    request = body or {"model": "m", "prompt": "p"}
    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    contextvars.copy_context().run(lambda: asyncio.run(proxy.completion(scope, json.dumps(request).encode(),
                                                                        receive, send)))
    status = sent[0]["status"]
    headers = dict(sent[0]["headers"])
    return status, headers, b"".join(m.get("body", b"") for m in sent[1:]), proxy, state, seen


def test_a_completion_goes_through():
    status, _unused, body, proxy, state, _unused = complete("ok")
    assert status == 200 and json.loads(body)["choices"][0]["text"] == "hi"
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]
    assert proxy.requests == {("/v1/completions", "200"): 1}


@pytest.mark.parametrize("behaviour", ["prefill_400", "decode_400"])
def test_a_backend_4xx_is_the_clients_answer_and_no_backend_is_suspected(behaviour):
    status, headers, body, proxy, state, _unused = complete(behaviour)
    assert status == 400 and headers[b"content-type"] == b"application/json"
    assert "10.0.0.1" not in body.decode() and ("[address hidden]" in body.decode() or "max_tokens" in body.decode())
    assert all(b.request_failures == 0 for b in proxy.backends.values())
    assert proxy.counters["a3_proxy_backend_client_errors_total"] == 1
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]


def test_an_empty_200_is_a_502_naming_the_role_not_the_address():
    status, _unused, body, proxy, state, _unused = complete("empty")
    err = json.loads(body)["error"]
    assert status == 502 and "empty body" in err["message"] and "the decode backend" in err["message"]
    assert "10.0.0" not in err["message"]
    assert proxy.backends[("decode", "10.0.0.2:2")].request_failures == 1
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]


def test_no_first_byte_is_a_503_and_the_load_is_released():
    status, headers, body, proxy, state, _unused = complete("hang")
    assert status == 503 and headers[b"retry-after"] == b"10" and "first-byte timeout" in body.decode()
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]
    assert proxy.counters["a3_proxy_first_byte_timeouts_total"] == 1


@pytest.mark.parametrize("stream", [False, True])
def test_blank_chunks_are_not_a_first_byte(stream):
    """A 200 whose body so far is blank (keep-alive newlines and spaces, an empty chunk): no first byte, so the
    first-byte timeout gives 503 and the client never sees the 200."""
    body = {"model": "m", "prompt": "p", "stream": stream}
    status, headers, answer, proxy, state, _unused = complete("blank", body)
    assert status == 503 and headers[b"retry-after"] == b"10" and "first-byte timeout" in answer.decode()
    assert proxy.counters["a3_proxy_first_byte_timeouts_total"] == 1
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]


def test_an_error_status_with_a_body_is_not_a_first_byte():
    """The upstream app's own 500 with a text body: not a first byte (not 2xx), so no answer starts; the client
    gets a 502 in OpenAI's shape, not the upstream's status and text."""
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Internal Server Error", "more_body": False})

    proxy, _unused = make(app, a3_first_byte_timeout=5.0)
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        await asyncio.sleep(3600)

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    began = time.monotonic()
    contextvars.copy_context().run(lambda: asyncio.run(proxy.completion(scope, b'{"prompt": "p", "stream": true}',
                                                                        receive, send)))
    assert time.monotonic() - began < 5.0  # answered when the upstream ended, not at the first-byte timeout
    err = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]
    assert sent[0]["status"] == 502 and err["type"] == "BadGatewayError"
    assert err["message"] == "the proxy engine answered HTTP 500: Internal Server Error"


def test_a_stalled_stream_ends_with_an_error_event_and_done():
    stream = {"model": "m", "prompt": "p", "stream": True}
    status, _unused, body, proxy, state, _unused = complete("stall_stream", stream)
    events = [ln[6:] for ln in body.decode().split("\n") if ln.startswith("data: ")]
    assert status == 200 and json.loads(events[0])["choices"][0]["text"] == "part" and events[-1] == "[DONE]"
    err = json.loads(events[1])["error"]
    assert err["code"] == 504 and "idle timeout" in err["message"] and "10.0.0" not in err["message"]
    assert proxy.counters["a3_proxy_idle_timeouts_total"] == 1
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]


def test_a_stalled_answer_is_a_504():
    status, _unused, body, proxy, state, _unused = complete("stall")
    assert status == 504 and json.loads(body)["error"]["type"] == "GatewayTimeoutError"
    assert loads(state) == [("10.0.0.1:1", 0.0, 0.0), ("10.0.0.2:2", 0.0, 0.0)]


def test_the_clients_kv_transfer_params_never_reach_the_upstream():
    status, _unused, _unused, proxy, _unused, seen = complete("ok", {"model": "m", "prompt": "p",
                                                                     "kv_transfer_params": {"remote_host": "x"}})
    assert status == 200 and seen == [{"model": "m", "prompt": "p"}]
    assert proxy.counters["a3_proxy_kv_transfer_params_dropped_total"] == 1


def test_without_a_healthy_decode_a_completion_is_refused_at_once():
    proxy, _unused = make(a3_fail_threshold=1)
    proxy.backends[("decode", "10.0.0.2:2")].observe(False, "HTTP 500", 1.0)
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(proxy.completion({"path": "/v1/chat/completions"}, b"{}", None, send))
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["message"] == "no healthy decode backend in rotation; retry later"
