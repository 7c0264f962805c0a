# -*- coding: utf-8 -*-
"""a3proxy.core, the forwarding of a completion: for each way an upstream request can go, every message the
client gets, the counters, the request counts, the backend suspected and the log lines, exactly (a scripted
upstream app, asyncio only)."""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time

import httpx
import pytest
from a3proxy import auth, core, engine

from proxy_fakes import fake_upstream, options

SECRETS = auth.Secrets((), "", "")
EP = "/v1/completions"
PREFILL, DECODE = "10.0.0.1:1", "10.0.0.2:2"
ANSWER = json.dumps({"choices": [{"index": 0, "text": "hi"}]}).encode()
NAMED = json.dumps({"choices": [{"index": 0, "text": "hi from 10.0.0.1:1"}]}).encode()
RELEASED = {"a3_proxy_load_released_total": 2}
CHUNK = b'data: {"choices": [{"text": "part"}]}\n\n'
DONE = b"data: [DONE]\n\n"
JSON = b"application/json"


def start(status=200, headers=((b"content-type", b"application/json"),)):
    return {"type": "http.response.start", "status": status, "headers": list(headers)}


def body(data, more=True):
    return {"type": "http.response.body", "body": data, "more_body": more}


def contacted(*entries):
    """A step: the upstream contacts these backends ((key, status) pairs), as its clients' hooks note it."""
    def step(request):
        request.trace.extend({"backend": key, "status": status} for key, status in entries)
    return step


def books(request_ids=(), released=False):
    """A step: the upstream books a prefill and a decode (and sent the prefill these request ids); released: and
    releases them, as on its success path."""
    def step(request):
        state = step.state
        p = state.select_prefiller(100.0)
        d = state.select_decoder(10.0)
        if request_ids:
            request.request_ids[PREFILL] = set(request_ids)
        if released:
            state.release_prefiller(p, 100.0)
            state.release_prefiller_kv(p, 100.0)
            state.release_decoder(d, 10.0)
    return step


HANG = "hang"


def scripted(*steps):
    """An upstream ASGI app that reads the request, then runs steps: a dict is sent, an exception raised, a
    number slept, a callable called with the request's state, HANG waits until the wrapper gives up."""
    async def app(scope, receive, send):
        app.seen.append(json.loads((await receive())["body"]))
        request = engine.current_request()
        for step in steps:
            if isinstance(step, dict):
                await send(step)
            elif isinstance(step, BaseException):
                raise step
            elif isinstance(step, (int, float)):
                await asyncio.sleep(step)
            elif step == HANG:
                await receive()
                return
            else:
                step.state = app.state
                step(request)
    app.seen = []
    return app


def run(app, request=None, receive=None, first_byte=0.3, idle=0.2, prefills=((PREFILL.split(":", maxsplit=1)[0], 1),),
        decodes=((DECODE.split(":", maxsplit=1)[0], 2),), path=EP, raw=None):
    up = fake_upstream(prefills, decodes, app)
    app.state = up.proxy_state
    proxy = core.HonestProxy(up, options(a3_first_byte_timeout=first_byte, a3_idle_timeout=idle), SECRETS)
    proxy._pin_selection()
    for backend in proxy.backends.values():
        backend.observe(True, "HTTP 200", 0.0)
    sent = []

    async def send(message):
        sent.append(message)

    async def waits():
        await asyncio.sleep(3600)

    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    data = raw if raw is not None else json.dumps(request or {"prompt": "p"}).encode()
    contextvars.copy_context().run(lambda: asyncio.run(proxy.completion(scope, data, receive or waits, send)))
    return proxy, sent


def error_answer(status, message, retry_after=False):
    """The messages of an error answer in OpenAI's shape."""
    etype = {400: "BadRequestError", 502: "BadGatewayError", 503: "ServiceUnavailableError",
             504: "GatewayTimeoutError"}[status]
    data = json.dumps({"error": {"message": message, "type": etype, "code": status}}).encode()
    headers = [(b"content-type", JSON), (b"content-length", str(len(data)).encode())]
    return [start(status, headers + ([(b"retry-after", b"10")] if retry_after else [])), body(data, False)]


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG, logger="a3_proxy")

    def lines():
        return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "a3_proxy"]
    return lines


def loads(proxy):
    state = proxy.up.proxy_state
    return [(str(s), s.active_tokens, s.active_kv_cache) for s in state.prefillers + state.decoders]


IDLE = [(PREFILL, 0.0, 0.0), (DECODE, 0.0, 0.0)]


def failures(proxy):
    """{backend: (request failures, the last one)}, each failure's time checked to be a moment ago."""
    for backend in proxy.backends.values():
        assert backend.last_request_failure_time is None or 0 <= time.time() - backend.last_request_failure_time < 60
        assert (backend.last_request_failure_time is None) == (backend.request_failures == 0)
    return {b.key: (b.request_failures, b.last_request_failure) for b in proxy.backends.values()}


# ----------------------------------------------------------------------------- answers that go through

def test_a_non_stream_answer_goes_through_with_the_upstreams_headers(logs):
    headers = [(b"Content-Type", b"text/x-json"), (b"Content-Length", b"99"), (b"Transfer-Encoding", b"chunked"),
               (b"x-extra", b"1")]
    app = scripted(books(released=True), contacted((PREFILL, 200), (DECODE, 200)), start(200, headers),
                   {"type": "http.response.body", "more_body": True}, body(NAMED[:5]),
                   {"type": "http.response.trailers"}, {"type": "http.response.body", "more_body": True},
                   body(NAMED[5:], False))
    proxy, sent = run(app)
    whole = NAMED  # a 2xx answer is the engines' text: not scrubbed
    assert sent == [start(200, [(b"content-type", b"text/x-json"), (b"content-length", str(len(whole)).encode()),
                                (b"x-extra", b"1")]), body(whole, False)]
    assert proxy.requests == {(EP, "200"): 1} and proxy.counters == {} and logs() == []
    assert loads(proxy) == IDLE and proxy.open == set()


def test_the_request_path_counts_no_in_flight_requests(monkeypatch):
    """A completion's health decision does without the backends' load and in-flight counts (walking every open
    request per backend made each request cost more the more were open); /a3/backends still has them."""
    calls = []

    def inflight(self, backend):
        calls.append(backend.key)
        return 0

    monkeypatch.setattr(core.HonestProxy, "inflight", inflight)
    app = scripted(books(released=True), contacted((PREFILL, 200), (DECODE, 200)), start(200),
                   body(NAMED, False))
    proxy, sent = run(app)
    assert sent[0]["status"] == 200 and calls == []
    assert sorted(s["backend"] for s in proxy.backends_answer()) == sorted(calls) == sorted([PREFILL, DECODE])
    # without counts, a snapshot says 0 of both rather than a stale or made-up number
    assert [(s["outstanding_load"], s["inflight_requests"]) for s in proxy.snapshots(counts=False)] == [(0.0, 0)] * 2


def test_an_answer_without_a_content_type_is_json():
    proxy, sent = run(scripted(start(200, [(b"x-extra", b"1")]), body(ANSWER, False)))
    assert sent[0]["headers"] == [(b"content-type", JSON), (b"content-length", str(len(ANSWER)).encode()),
                                  (b"x-extra", b"1")]
    proxy, sent = run(scripted({"type": "http.response.start", "status": 200}, body(ANSWER, False)))
    assert sent == [start(200, [(b"content-type", JSON), (b"content-length", str(len(ANSWER)).encode())]),
                    body(ANSWER, False)]


def test_a_stream_is_relayed_chunk_by_chunk(logs):
    headers = [(b"Content-Type", b"text/event-stream"), (b"Content-Length", b"99"), (b"x-extra", b"1")]
    app = scripted(books(released=True), contacted((PREFILL, 200), (DECODE, 200)), start(200, headers),
                   {"type": "http.response.body", "more_body": True}, body(CHUNK), {"type": "http.response.trailers"},
                   body(b""), {"type": "http.response.body", "more_body": True}, body(CHUNK), body(DONE, False))
    proxy, sent = run(app, {"prompt": "p", "stream": True})
    assert sent == [start(200, [(b"Content-Type", b"text/event-stream"), (b"x-extra", b"1")]), body(CHUNK),
                    body(CHUNK), body(DONE), body(b"", False)]
    assert proxy.requests == {(EP, "200"): 1} and proxy.counters == {} and logs() == []
    assert loads(proxy) == IDLE and proxy.open == set()


def test_a_stream_whose_first_chunk_is_long_enough_for_done():
    proxy, sent = run(scripted(start(), body(CHUNK + DONE, False)), {"stream": True})
    assert sent == [start(), body(CHUNK + DONE), body(b"", False)]


def test_what_the_client_asked_is_what_the_upstream_reads():
    app = scripted(start(), body(ANSWER, False))
    run(app, {"prompt": "é", "stream": False})
    assert app.seen == [{"prompt": "é", "stream": False}]


def test_the_request_counts_as_open_while_it_runs():
    seen = []

    def look(request):
        seen.append([(s["backend"], s["inflight_requests"]) for s in look.proxy.snapshots()])

    app = scripted(books(), look, start(), body(ANSWER, False))
    up = fake_upstream(app=app)
    app.state = up.proxy_state
    proxy = core.HonestProxy(up, options(), SECRETS)
    proxy._pin_selection()
    for backend in proxy.backends.values():
        backend.observe(True, "HTTP 200", 0.0)
    look.proxy = proxy
    sent = []

    async def send(message):
        sent.append(message)

    contextvars.copy_context().run(lambda: asyncio.run(proxy.completion({"path": EP, "headers": []}, b"{}",
                                                                        None, send)))
    assert seen == [[(PREFILL, 1), (DECODE, 1)]] and proxy.open == set() and sent[0]["status"] == 200


# ----------------------------------------------------------------------------- refused before forwarding

def test_a_body_that_is_not_a_json_object_is_a_400(logs):
    app = scripted(start(), body(ANSWER, False))
    proxy, sent = run(app, raw=b"[1, 2]")
    assert sent == error_answer(400, "the request body must be a JSON object")
    assert proxy.requests == {(EP, "400"): 1} and proxy.counters == {} and app.seen == [] and logs() == []


def test_the_clients_kv_transfer_params_are_dropped_and_logged(logs):
    app = scripted(start(), body(ANSWER, False))
    proxy, sent = run(app, {"prompt": "p", "kv_transfer_params": {"remote_host": "x"}}, path="/v1/chat/completions")
    assert app.seen == [{"prompt": "p"}] and sent[0]["status"] == 200
    assert proxy.counters == {"a3_proxy_kv_transfer_params_dropped_total": 1}
    assert proxy.requests == {("/v1/chat/completions", "200"): 1}
    assert logs() == [("INFO", "/v1/chat/completions: the client's kv_transfer_params were dropped (the proxy "
                               "engine sets its own)")]


def test_without_a_healthy_backend_the_answer_is_a_503_at_once(logs):
    app = scripted(start(), body(ANSWER, False))
    up = fake_upstream(app=app)
    proxy = core.HonestProxy(up, options(a3_fail_threshold=1), SECRETS)
    proxy.backends[("prefill", PREFILL)].observe(True, "HTTP 200", 0.0)
    proxy.backends[("decode", DECODE)].observe(False, "HTTP 500", 0.0)
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(proxy.completion({"path": EP}, b"{}", None, send))
    assert sent == error_answer(503, "no healthy decode backend in rotation; retry later", retry_after=True)
    assert proxy.counters == {"a3_proxy_no_backend_total": 1} and proxy.requests == {(EP, "503"): 1}
    assert logs() == [("WARNING", "/v1/completions: 503 at once: no healthy decode backend in rotation "
                                  "(10.0.0.2:2 out of rotation: 1 consecutive failed /health probes (last: "
                                  "HTTP 500))")]
    assert app.seen == []


# ----------------------------------------------------------------------------- no first byte

def test_no_first_byte_is_a_503_naming_the_backend_waited_on(logs):
    app = scripted(books(["rid-1"]), contacted((PREFILL, 200), (DECODE, None)), start(), body(b" \n"), HANG)
    began = time.monotonic()
    proxy, sent = run(app, first_byte=0.3)
    assert time.monotonic() - began < 2.0
    assert sent == error_answer(503, "no answer from the backends within 0.3s (first-byte timeout, waiting on the "
                                     "decode backend); the request was cancelled, retry later", retry_after=True)
    assert proxy.counters == dict(RELEASED, a3_proxy_first_byte_timeouts_total=1)
    assert proxy.requests == {(EP, "503"): 1}
    assert logs() == [("WARNING", "request failed (no first byte within 0.3s), waiting on decode backend "
                                  "10.0.0.2:2: probing the backends now"),
                      ("WARNING", "/v1/completions: no first byte within 0.3s, waiting on decode backend "
                                  "10.0.0.2:2 -> 503")]
    assert failures(proxy) == {PREFILL: (0, None), DECODE: (1, "no first byte within 0.3s")}
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == [(PREFILL, "rid-1")]


def test_no_first_byte_releases_what_was_booked_and_aborts_the_prefill():
    app = scripted(books(["rid-1", "rid-0"]), HANG)
    proxy, _unused = run(app, first_byte=0.1)
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == [(PREFILL, "rid-0"), (PREFILL, "rid-1")]


def test_no_first_byte_before_any_backend_was_contacted(logs):
    proxy, sent = run(scripted(HANG), first_byte=0.1)
    assert sent == error_answer(503, "no answer from the backends within 0.1s (first-byte timeout); the request "
                                     "was cancelled, retry later", retry_after=True)
    assert logs() == [("WARNING", "request failed (no first byte within 0.1s): probing the backends now"),
                      ("WARNING", "/v1/completions: no first byte within 0.1s -> 503")]
    assert failures(proxy) == {PREFILL: (0, None), DECODE: (0, None)}


def test_a_backend_the_proxy_does_not_track_is_named_in_the_log_only(logs):
    proxy, sent = run(scripted(contacted(("10.9.9.9:9", None)), HANG), first_byte=0.1)
    assert json.loads(sent[1]["body"])["error"]["message"] == (
        "no answer from the backends within 0.1s (first-byte timeout); the request was cancelled, retry later")
    assert logs() == [("WARNING", "request failed (no first byte within 0.1s), waiting on backend 10.9.9.9:9: "
                                  "probing the backends now"),
                      ("WARNING", "/v1/completions: no first byte within 0.1s, waiting on backend 10.9.9.9:9 -> 503")]


def test_a_backend_serving_both_roles_is_named_with_both(logs):
    proxy, sent = run(scripted(contacted(("10.0.0.1:1", None)), HANG), first_byte=0.1,
                      decodes=(("10.0.0.1", 1),))
    assert json.loads(sent[1]["body"])["error"]["message"] == (
        "no answer from the backends within 0.1s (first-byte timeout, waiting on the decode or prefill backend); "
        "the request was cancelled, retry later")
    assert logs()[1] == ("WARNING", "/v1/completions: no first byte within 0.1s, waiting on prefill backend "
                                    "10.0.0.1:1 or decode backend 10.0.0.1:1 -> 503")
    assert [b.request_failures for b in proxy.backends.values()] == [1, 1]


def test_the_first_byte_timeout_counts_from_the_start_not_per_message():
    """Messages that are no first byte (blank chunks) do not restart the wait."""
    app = scripted(start(), body(b"\n"), 0.15, body(b"\n"), 0.15, body(b"\n"), 0.15, body(ANSWER, False))
    proxy, sent = run(app, first_byte=0.3)
    assert sent[0]["status"] == 503


def test_a_first_byte_after_the_timeout_is_too_late():
    proxy, sent = run(scripted(start(), 0.6, body(ANSWER, False)), first_byte=0.2)
    assert sent[0]["status"] == 503


def test_a_first_byte_in_time_is_waited_for():
    proxy, sent = run(scripted(start(), 0.2, body(ANSWER, False)), first_byte=1.5)
    assert sent[0]["status"] == 200 and sent[1]["body"] == ANSWER


# ----------------------------------------------------------------------------- the client left

def test_a_client_gone_before_the_first_byte_gets_nothing(logs):
    async def gone():
        await asyncio.sleep(0.1)
        return {"type": "http.disconnect"}

    app = scripted(books(["rid-1"]), HANG)
    proxy, sent = run(app, receive=gone, first_byte=2.0)
    assert sent == [] and proxy.requests == {(EP, "499"): 1} and proxy.counters == RELEASED and logs() == []
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == [(PREFILL, "rid-1")]


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_gone_after_the_first_byte_gets_no_more(stream, logs):
    async def gone():
        await asyncio.sleep(0.1)
        return {"type": "http.disconnect"}

    app = scripted(books(["rid-1"]), start(), body(CHUNK), HANG)
    proxy, sent = run(app, {"stream": stream}, receive=gone, idle=2.0)
    if stream:
        assert sent == [start(), body(CHUNK)] and proxy.requests == {(EP, "200"): 1}
    else:
        assert sent == [] and proxy.requests == {(EP, "499"): 1}
    assert proxy.counters == RELEASED and logs() == []
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == []


# ----------------------------------------------------------------------------- after the first byte, not a stream

def test_a_stalled_answer_is_a_504_naming_the_backend(logs):
    app = scripted(books(), contacted((PREFILL, 200), (DECODE, None)), start(), body(b'{"cho'), HANG)
    proxy, sent = run(app, idle=0.2)
    assert sent == error_answer(504, "the answer stalled: nothing from the backends for 0.2s after it started (idle "
                                     "timeout, waiting on the decode backend); the request was cancelled")
    assert proxy.counters == dict(RELEASED, a3_proxy_idle_timeouts_total=1) and proxy.requests == {(EP, "504"): 1}
    assert logs() == [("WARNING", "request failed (the answer stalled for 0.2s after its first byte), waiting on "
                                  "decode backend 10.0.0.2:2: probing the backends now"),
                      ("WARNING", "/v1/completions: the answer stalled for 0.2s after its first byte, waiting on "
                                  "decode backend 10.0.0.2:2 -> 504")]
    assert failures(proxy)[DECODE] == (1, "the answer stalled for 0.2s after its first byte")
    assert loads(proxy) == IDLE


def test_a_stalled_answer_without_a_backend_to_name(logs):
    proxy, sent = run(scripted(start(), body(b'{"cho'), HANG), idle=0.2)
    assert sent == error_answer(504, "the answer stalled: nothing from the backends for 0.2s after it started (idle "
                                     "timeout); the request was cancelled")
    assert logs() == [("WARNING", "request failed (the answer stalled for 0.2s after its first byte): probing the "
                                  "backends now"),
                      ("WARNING", "/v1/completions: the answer stalled for 0.2s after its first byte -> 504")]


def test_an_answer_cut_after_its_first_byte_is_a_502(logs):
    app = scripted(contacted((DECODE, 200)), start(), body(b'{"cho'), RuntimeError("boom"))
    proxy, sent = run(app)
    assert sent == error_answer(502, "the backends' answer is not a completion (no 'choices'): {\"cho [last backend: "
                                     "the decode backend]")
    assert proxy.counters == {"a3_proxy_not_completion_blocked_total": 1} and proxy.requests == {(EP, "502"): 1}
    assert logs() == [("WARNING", "request failed (not_completion), waiting on decode backend 10.0.0.2:2: probing "
                                  "the backends now"),
                      ("WARNING", "/v1/completions: the backends' answer is not a completion (no 'choices'): "
                                  "{\"cho [last backend: decode backend 10.0.0.2:2] -> 502")]


def test_an_answer_that_ends_after_its_first_byte_is_judged_whole():
    proxy, sent = run(scripted(start(), body(b'{"error": {"message": "boom at 10.0.0.2:2"}}'), body(b"", False)))
    assert sent == error_answer(502, "the backend reported an error: boom at [address hidden]")
    assert proxy.counters == {"a3_proxy_upstream_errors_total": 1}


# ----------------------------------------------------------------------------- answers that are not one

def test_an_empty_200_is_a_502(logs):
    app = scripted(books(), contacted((PREFILL, 200), (DECODE, 200)), start(), body(b"", False))
    proxy, sent = run(app)
    message = ("the backends gave no answer: the proxy engine returned HTTP 200 with an empty body (a decode backend "
               "down, or its answer unusable)")
    assert sent == error_answer(502, message + " [last backend: the decode backend]")
    assert proxy.counters == dict(RELEASED, a3_proxy_empty_200_blocked_total=1)
    assert proxy.requests == {(EP, "502"): 1}
    assert logs() == [("WARNING", "request failed (empty_200), waiting on decode backend 10.0.0.2:2: probing the "
                                  "backends now"),
                      ("WARNING", "/v1/completions: %s [last backend: decode backend 10.0.0.2:2] -> 502" % message)]
    assert failures(proxy)[DECODE] == (1, "empty_200")


def test_an_empty_200_without_a_backend_to_name(logs):
    proxy, sent = run(scripted(start(), body(b"", False)))
    message = ("the backends gave no answer: the proxy engine returned HTTP 200 with an empty body (a decode backend "
               "down, or its answer unusable)")
    assert sent == error_answer(502, message)
    assert logs() == [("WARNING", "request failed (empty_200): probing the backends now"),
                      ("WARNING", "/v1/completions: %s -> 502" % message)]


def test_an_exception_before_any_answer_names_the_url_in_the_log_only(logs):
    request = httpx.Request("POST", "http://10.0.0.2:2/v1/completions")
    app = scripted(contacted((DECODE, None)), httpx.ConnectError("refused", request=request))
    proxy, sent = run(app)
    assert sent == error_answer(502, "the proxy engine failed before answering (ConnectError: refused) [last "
                                     "backend: the decode backend]")
    assert proxy.counters == {"a3_proxy_upstream_errors_total": 1}
    assert logs()[1] == ("WARNING", "/v1/completions: the proxy engine failed before answering (ConnectError: "
                                    "refused (POST http://10.0.0.2:2/v1/completions)) [last backend: decode backend "
                                    "10.0.0.2:2] -> 502")
    assert failures(proxy)[DECODE] == (1, "upstream_error")


def test_the_upstreams_own_500_is_a_502():
    proxy, sent = run(scripted(start(500, [(b"content-type", b"text/plain")]), body(b"Internal "),
                               body(b"Server Error", False)))
    assert sent == error_answer(502, "the proxy engine answered HTTP 500: Internal Server Error")
    assert proxy.counters == {"a3_proxy_upstream_errors_total": 1}


@pytest.mark.parametrize("stream", [False, True])
def test_a_3xx_with_a_body_is_no_first_byte(stream):
    proxy, sent = run(scripted(start(300), body(ANSWER), body(b"", False)), {"stream": stream})
    assert sent == error_answer(502, "the proxy engine answered HTTP 300: %s" % ANSWER.decode())


def test_the_upstreams_own_4xx_json_error_is_passed_on_without_addresses():
    headers = [(b"content-type", b"application/json"), (b"x-extra", b"1")]
    data = b'{"error": {"message": "no model at 10.0.0.1:1"}}'
    proxy, sent = run(scripted(start(400, headers), body(data, False)))
    scrubbed = b'{"error": {"message": "no model at [address hidden]"}}'
    assert sent == [start(400, [(b"content-type", JSON), (b"content-length", str(len(scrubbed)).encode()),
                                (b"x-extra", b"1")]), body(scrubbed, False)]
    assert proxy.requests == {(EP, "400"): 1} and proxy.counters == {}


# ----------------------------------------------------------------------------- a backend's 4xx

def backend_answer(status, data, backend=DECODE):
    return engine.BackendAnswer(status, data, "application/json", backend)


def test_a_backends_4xx_is_the_clients_answer(logs):
    data = b'{"error": {"message": "max_tokens must be at least 1 (10.0.0.2:2)", "type": "BadRequestError", ' \
           b'"code": 400, "pad": "' + b"x" * 300 + b'"}}'
    app = scripted(books(["rid-1"]), contacted((PREFILL, 200), (DECODE, 400)), start(), backend_answer(400, data))
    proxy, sent = run(app)
    scrubbed = data.replace(b"10.0.0.2:2", b"[address hidden]")
    assert sent == [start(400, [(b"content-type", JSON), (b"content-length", str(len(scrubbed)).encode())]),
                    body(scrubbed, False)]
    assert proxy.counters == dict(RELEASED, a3_proxy_backend_client_errors_total=1)
    assert proxy.requests == {(EP, "400"): 1}
    assert logs() == [("WARNING", "/v1/completions: backend 10.0.0.2:2 answered HTTP 400 (passed on to the client, "
                                  "not retried): %s..." % data.decode()[:300])]
    assert failures(proxy) == {PREFILL: (0, None), DECODE: (0, None)}
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == [(PREFILL, "rid-1")]


def test_a_backend_refusing_the_proxys_key_is_a_502_and_an_error_in_the_log(logs):
    data = b"Unauthorized " + b"y" * 300
    proxy, sent = run(scripted(backend_answer(401, data, PREFILL)))
    message = ("the backends refused the proxy's key (HTTP 401: %s...): the engines' key (vllm_api_key) is not "
               "theirs" % data.decode()[:200])
    assert sent == error_answer(502, message)
    assert proxy.counters == {"a3_proxy_backend_client_errors_total": 1} and proxy.requests == {(EP, "502"): 1}
    assert logs() == [("ERROR", "/v1/completions: backend 10.0.0.1:1 refused the proxy's key (HTTP 401): %s...; "
                                "check vllm_api_key" % data.decode()[:300])]


def test_a_backends_4xx_inside_an_exception_group_is_found():
    group = BaseExceptionGroup("tasks", [backend_answer(422, b'{"detail": "field required"}')])
    proxy, sent = run(scripted(group))
    assert sent[0]["status"] == 422
    assert json.loads(sent[1]["body"]) == {"error": {"message": "field required", "type": "BadRequestError",
                                                     "param": None, "code": 422}}


def status_error(status, data):
    request = httpx.Request("POST", "http://10.0.0.2:2/v1/completions")
    return httpx.HTTPStatusError("bad", request=request, response=httpx.Response(status, content=data,
                                                                                 request=request))


@pytest.mark.parametrize("status", [400, 499])
def test_a_4xx_json_error_the_upstream_raised_is_passed_on(status, logs):
    data = b'{"detail": "bad at 10.0.0.2:2"}'
    proxy, sent = run(scripted(status_error(status, data)))
    scrubbed = b'{"detail": "bad at [address hidden]"}'
    assert sent == [start(status, [(b"content-type", JSON), (b"content-length", str(len(scrubbed)).encode())]),
                    body(scrubbed, False)]
    assert proxy.requests == {(EP, str(status)): 1} and proxy.counters == {} and logs() == []


@pytest.mark.parametrize("status, data, detail", [
    (500, b'{"detail": "engine dead"}', "engine dead"),
    (500, b"engine dead", "engine dead"),
    (404, b"no such route", "no such route"),
])
def test_any_other_error_the_upstream_raised_is_a_502(status, data, detail):
    proxy, sent = run(scripted(status_error(status, data)))
    assert sent == error_answer(502, "the proxy engine failed before answering (backend answered HTTP %d: %s)"
                                % (status, detail))


# ----------------------------------------------------------------------------- a stream that does not end well

def stream_tail(message, status=502, previous=CHUNK):
    from a3proxy.answers import sse_error_tail
    return sse_error_tail(message, previous, status)


def test_a_stream_cut_by_an_exception_ends_with_an_error_event(logs):
    request = httpx.Request("POST", "http://10.0.0.2:2/v1/completions")
    app = scripted(books(["rid-1"]), contacted((PREFILL, 200), (DECODE, 200)), start(), body(CHUNK),
                   httpx.ReadError("reset", request=request))
    proxy, sent = run(app, {"stream": True})
    why = "the answer stream was cut before it ended (a decode backend failed mid-answer)"
    assert sent == [start(), body(CHUNK), body(stream_tail(why + ": ReadError: reset [last backend: the decode "
                                                                 "backend]"), False)]
    assert proxy.counters == dict(RELEASED, a3_proxy_stream_interrupted_total=1)
    assert proxy.requests == {(EP, "200"): 1}
    assert logs() == [("WARNING", "request failed (stream cut), waiting on decode backend 10.0.0.2:2: probing the "
                                  "backends now"),
                      ("WARNING", "/v1/completions: %s: ReadError: reset (POST http://10.0.0.2:2/v1/completions) "
                                  "[last backend: decode backend 10.0.0.2:2]" % why)]
    assert failures(proxy)[DECODE] == (1, "stream cut")
    assert loads(proxy) == IDLE and proxy.up.proxy_state.aborted == []


def test_a_stream_that_ends_without_done_ends_with_an_error_event(logs):
    proxy, sent = run(scripted(start(), body(b'data: {"cho'), body(b"", False)), {"stream": True})
    why = "the answer stream was cut before it ended (a decode backend failed mid-answer)"
    assert sent == [start(), body(b'data: {"cho'), body(stream_tail(why, previous=b"x"), False)]
    assert logs() == [("WARNING", "request failed (stream cut): probing the backends now"),
                      ("WARNING", "/v1/completions: " + why)]
    assert proxy.counters == {"a3_proxy_stream_interrupted_total": 1}


def test_a_stalled_stream_ends_with_a_504_event(logs):
    app = scripted(contacted((PREFILL, 200), (DECODE, None)), start(), body(CHUNK), HANG)
    proxy, sent = run(app, {"stream": True}, idle=0.2)
    why = "the answer stream stalled: nothing from the backends for 0.2s (idle timeout)"
    assert sent == [start(), body(CHUNK), body(stream_tail(why + " [last backend: the decode backend]", 504), False)]
    assert proxy.counters == {"a3_proxy_idle_timeouts_total": 1, "a3_proxy_stream_interrupted_total": 1}
    assert logs() == [("WARNING", "request failed (stream stalled), waiting on decode backend 10.0.0.2:2: probing "
                                  "the backends now"),
                      ("WARNING", "/v1/completions: %s [last backend: decode backend 10.0.0.2:2]" % why)]


def test_a_stalled_stream_without_a_backend_to_name(logs):
    proxy, sent = run(scripted(start(), body(CHUNK), HANG), {"stream": True}, idle=0.2)
    why = "the answer stream stalled: nothing from the backends for 0.2s (idle timeout)"
    assert sent[-1] == body(stream_tail(why, 504), False)
    assert logs()[-1] == ("WARNING", "/v1/completions: " + why)


def test_a_decode_retried_mid_stream_stops_the_stream_before_the_repeat(logs):
    app = scripted(contacted((PREFILL, 200), (DECODE, 200)), start(), body(CHUNK), body(CHUNK), 0.1,
                   contacted((DECODE, 200)), body(b""), body(b"data: repeated\n\n"), body(DONE, False))
    proxy, sent = run(app, {"stream": True})
    why = ("the answer stream was cut before it ended (a decode backend failed mid-answer); the proxy engine retried "
           "the decode from the start, the repeated text was not sent")
    assert sent == [start(), body(CHUNK), body(CHUNK), body(stream_tail(why + " [last backend: the decode backend]"),
                                                            False)]
    assert proxy.counters == {"a3_proxy_stream_interrupted_total": 1}


def test_a_recomputed_continuation_is_no_retry():
    app = scripted(contacted((DECODE, 200)), start(), body(CHUNK), contacted((PREFILL, 200), (DECODE, 200)),
                   body(CHUNK), body(DONE, False))
    proxy, sent = run(app, {"stream": True})
    assert sent == [start(), body(CHUNK), body(CHUNK), body(DONE), body(b"", False)] and proxy.counters == {}


# ----------------------------------------------------------------------------- backends with host names

def test_host_names_of_the_backends_are_hidden_in_every_error_passed_on():
    named = dict(prefills=(("node-p1", 1),), decodes=(("node-d1", 2),))
    data = b'{"error": {"message": "bad request for node-d1"}}'
    hidden = b'{"error": {"message": "bad request for [address hidden]"}}'
    proxy, sent = run(scripted(backend_answer(400, data, "node-d1:2")), **named)
    assert sent[1]["body"] == hidden
    proxy, sent = run(scripted(status_error(400, data)), **named)
    assert sent[1]["body"] == hidden
    proxy, sent = run(scripted(start(400), body(data, False)), **named)
    assert sent[1]["body"] == hidden


def test_a_stream_start_without_headers():
    proxy, sent = run(scripted({"type": "http.response.start", "status": 200}, body(CHUNK), body(DONE, False)),
                      {"stream": True})
    assert sent == [start(200, []), body(CHUNK), body(DONE), body(b"", False)]


def test_a_backend_the_proxy_does_not_track_mid_stream_is_no_retry():
    app = scripted(start(), body(CHUNK), 0.1, contacted(("10.9.9.9:9", 200)), body(CHUNK), body(DONE, False))
    proxy, sent = run(app, {"stream": True})
    assert sent == [start(), body(CHUNK), body(CHUNK), body(DONE), body(b"", False)]
