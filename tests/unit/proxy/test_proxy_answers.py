# -*- coding: utf-8 -*-
"""a3proxy.answers: what a client gets for the upstream's answers, error bodies, SSE tails, address scrubbing."""
from __future__ import annotations

import asyncio
import json

import pytest
from a3proxy import answers as a

COMPLETION = json.dumps({"id": "x", "choices": [{"index": 0, "message": {"content": "hi"}}],
                         "usage": {"completion_tokens": 1}}).encode()


def test_error_body_is_openai_style():
    assert a.error_body("m", "ServiceUnavailableError", 503) == {
        "error": {"message": "m", "type": "ServiceUnavailableError", "code": 503}}


@pytest.mark.parametrize("status, etype, code", [
    (401, "invalid_request_error", "invalid_api_key"), (404, "invalid_request_error", "unknown_url"),
    (405, "invalid_request_error", "method_not_allowed"), (408, "invalid_request_error", "request_timeout"),
    (413, "invalid_request_error", "request_too_large"), (400, "BadRequestError", 400),
    (502, "BadGatewayError", 502), (503, "ServiceUnavailableError", 503), (504, "GatewayTimeoutError", 504),
    (418, "Error", 418)])
def test_client_error_types_and_codes(status, etype, code):
    assert a.client_error(status, "m") == {"error": {"message": "m", "type": etype, "code": code}}


@pytest.mark.parametrize("status, body, kind", [
    (200, b"", "empty_200"),
    (200, b"  \n", "empty_200"),
    (200, b"null", "not_completion"),
    (200, b"not json", "not_completion"),
    (200, b'{"id": "x"}', "not_completion"),
    (200, b'{"choices": []}', "not_completion"),
    (200, b'{"error": {"message": "boom"}}', "upstream_error"),
    (500, b"Internal Server Error", "upstream_status"),
    (500, b'{"error": {"message": "engine dead"}}', "upstream_status"),
    (503, b"", "upstream_status"),
    (404, b"<html>not found</html>", "upstream_status"),
    (302, b"", "upstream_status"),
    (None, b"", "upstream_error"),
])
def test_classify_blocks_what_is_not_an_answer(status, body, kind):
    verdict = a.classify_answer(status, body)
    assert not verdict.passed and verdict.code == 502 and verdict.kind == kind and verdict.message


def test_classify_passes_completions_and_backend_4xx_json_errors():
    assert a.classify_answer(200, COMPLETION).passed
    assert a.classify_answer(404, b'{"error": {"message": "The model `x` does not exist."}}').passed
    assert a.classify_answer(400, b'{"error": "bad"}').passed
    assert a.classify_answer(422, b'{"detail": [{"msg": "field required"}]}').passed
    assert a.classify_answer(400, b'{"object": "error", "message": "bad", "code": 400}').passed  # older vLLM


def test_classify_messages_name_the_cause():
    assert "engine dead" in a.classify_answer(500, b'{"error": {"message": "engine dead"}}').message
    assert "HTTP 500" in a.classify_answer(500, b"Internal Server Error").message
    msg = a.classify_answer(500, b"Internal Server Error", "ConnectError: All connection attempts failed").message
    assert msg == "the proxy engine answered HTTP 500: ConnectError: All connection attempts failed"
    msg = a.classify_answer(None, b"", "ReadError: boom").message
    assert "ReadError: boom" in msg
    assert "empty body" in a.classify_answer(200, b"").message
    assert len(a.classify_answer(200, b"x" * 5000).message) < 500  # snippets are short


@pytest.mark.parametrize("previous, sep", [(b"", b""), (b"data: {}\n\n", b""), (b"data: {}\n", b"\n"),
                                           (b'data: {"cho', b"\n\n")])
def test_sse_error_tail(previous, sep):
    tail = a.sse_error_tail("cut", previous)
    assert tail.startswith(sep + b"data: {")
    events = [ln[6:] for ln in (previous + tail).decode().split("\n") if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2]) == {"error": {"message": "cut", "type": "BadGatewayError", "code": 502}}


def test_sse_error_tail_of_a_stalled_stream_is_a_504():
    events = [ln[6:] for ln in a.sse_error_tail("stalled", b"", 504).decode().split("\n") if ln.startswith("data: ")]
    assert json.loads(events[0])["error"] == {"message": "stalled", "type": "GatewayTimeoutError", "code": 504}


def test_done_tracker_finds_done_split_across_chunks():
    t = a.DoneTracker()
    for chunk in (b"data: {}\n\n", b"data: [DO", b"NE]\n\n"):
        t.feed(chunk)
    assert t.done and t.data
    t = a.DoneTracker()
    t.feed(b"data: {}\n\n")
    assert not t.done and t.data
    t = a.DoneTracker()
    t.feed(b"\n")
    assert not t.data


@pytest.mark.parametrize("text, hosts, want", [
    ("backend POST http://10.0.0.3:6700/v1/completions answered", (), "backend POST [address hidden] answered"),
    ("waiting on decode backend 10.0.0.3:6700", (), "waiting on decode backend [address hidden]"),
    ("at 192.168.1.20 and [fe80::1]:80 then [2001:db8::5]", (), "at [address hidden] and [address hidden] then "
                                                                "[address hidden]"),
    ("node-d1:6700 and node-d1 and node-d10", ("node-d1",), "[address hidden] and [address hidden] and node-d10"),
    ("fe80::1:6700 refused", ("fe80::1",), "[address hidden] refused"),
    ("https://etcd.internal:2379/v3 down", (), "[address hidden] down"),
    ("max_tokens must be at least 1, got -5.", ("10.0.0.3",), "max_tokens must be at least 1, got -5."),
    ("version 1.2.3 at 12:30:45", (), "version 1.2.3 at 12:30:45"),
])
def test_scrub_addresses(text, hosts, want):
    assert a.scrub_addresses(text, hosts) == want


def test_scrub_body_keeps_json_valid():
    body = json.dumps({"error": {"message": 'bad "x" at http://10.0.0.3:6700/v1 (10.0.0.3:6700)'}}).encode()
    scrubbed = a.scrub_body(body, ["10.0.0.3"])
    assert json.loads(scrubbed)["error"]["message"] == 'bad "x" at [address hidden] ([address hidden])'


def test_forwardable_request_drops_kv_transfer_params():
    body = json.dumps({"model": "m", "prompt": "p", "kv_transfer_params": {"remote_host": "203.0.113.9"}}).encode()
    request, forwarded, dropped = a.forwardable_request(body)
    assert dropped and request == {"model": "m", "prompt": "p"} and json.loads(forwarded) == request
    plain = b'{"model": "m", "prompt": "\xe4\xbd\xa0"}'
    request, forwarded, dropped = a.forwardable_request(plain)
    assert not dropped and forwarded is plain and request["prompt"] == "\u4f60"  # untouched without it
    for bad in (b"not json", b"[1]", b"null", b""):
        assert a.forwardable_request(bad) == (None, bad, False)


def test_send_json():
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(a.send_json(send, 503, {"x": "é"}, [(b"retry-after", b"7")]))
    assert sent[0]["status"] == 503 and (b"retry-after", b"7") in sent[0]["headers"]
    assert (b"content-length", str(len(sent[1]["body"])).encode()) in sent[0]["headers"]
    assert json.loads(sent[1]["body"]) == {"x": "é"} and sent[1]["more_body"] is False


def test_a_backend_4xx_in_openai_shape_is_passed_as_it_is():
    body = b'{"error": {"message": "max_tokens must be at least 1, got -5.", "type": "BadRequestError", "code": 400}}'
    assert a.backend_error_answer(400, body) == (400, body)


@pytest.mark.parametrize("status, body, message, etype, code", [
    (400, b'{"object": "error", "message": "bad", "type": "BadRequestError", "param": "max_tokens", "code": 400}',
     "bad", "BadRequestError", 400),                                          # vLLM's older shape
    (422, b'{"detail": [{"msg": "field required"}]}', "[{'msg': 'field required'}]", "BadRequestError", 422),
    (404, b"no such route", "no such route", "BadRequestError", 404),
    (429, b"", "HTTP 429", "BadRequestError", 429),
    (400, b'{"error": "bad"}', "bad", "BadRequestError", 400),
])
def test_a_backend_4xx_is_rewrapped_in_openai_shape(status, body, message, etype, code):
    got_status, got = a.backend_error_answer(status, body)
    err = json.loads(got)["error"]
    assert got_status == status and (err["message"], err["type"], err["code"]) == (message, etype, code)


@pytest.mark.parametrize("status", [401, 403])
def test_a_backend_refusing_the_proxys_key_is_a_502_not_the_clients_401(status):
    got_status, got = a.backend_error_answer(status, b'{"error": "Unauthorized"}')
    err = json.loads(got)["error"]
    assert got_status == 502 and err["code"] == 502 and "vllm_api_key" in err["message"]
    assert "HTTP %d: Unauthorized" % status in err["message"]


# ----------------------------------------------------------------------------- every text and edge, exactly

def test_a_verdict_shows_what_it_holds():
    assert repr(a.Verdict(False, 502, "m", "empty_200")) == (
        "Verdict(passed=False, code=502, kind='empty_200', message='m')")


@pytest.mark.parametrize("status, body, failure, message", [
    (None, b"", None, "the proxy engine failed before answering"),
    (None, None, "ReadError: boom", "the proxy engine failed before answering (ReadError: boom)"),
    (200, b" ", None, "the backends gave no answer: the proxy engine returned HTTP 200 with an empty body (a decode "
                      "backend down, or its answer unusable)"),
    (204, b"", "x", "the backends gave no answer: the proxy engine returned HTTP 204 with an empty body (a decode "
                    "backend down, or its answer unusable) (x)"),
    (200, b'{"error": {"message": "boom"}}', None, "the backend reported an error: boom"),
    (200, b'{"id":  "x"}', None, "the backends' answer is not a completion (no 'choices'): {\"id\": \"x\"}"),
    (200, b'{"choices": {"text": "x"}}', None, "the backends' answer is not a completion (no 'choices'): "
     '{"choices": {"text": "x"}}'),
    (500, b'{"error": {"message": "engine dead"}}', None, "the proxy engine answered HTTP 500: engine dead"),
    (500, b'{"detail": "nope"}', "", "the proxy engine answered HTTP 500: nope"),
    (503, b"", None, "the proxy engine answered HTTP 503"),
    (300, b"see\n other", None, "the proxy engine answered HTTP 300: see other"),
    (404, b"plain", "ReadError: x", "the proxy engine answered HTTP 404: ReadError: x"),
])
def test_classify_answer_messages(status, body, failure, message):
    verdict = a.classify_answer(status, body, failure)
    assert verdict.passed is False and verdict.code == 502 and verdict.message == message


@pytest.mark.parametrize("status", [199, 300, 301])
def test_only_a_2xx_completion_passes(status):
    verdict = a.classify_answer(status, COMPLETION)
    assert verdict.passed is False and verdict.kind == "upstream_status"


def test_a_passed_answer_is_the_shared_pass():
    assert a.classify_answer(299, COMPLETION) is a.PASS and a.PASS.passed is True
    assert (a.PASS.code, a.PASS.message, a.PASS.kind) == (None, None, None)


def test_error_text_of_each_shape():
    assert a.error_text({"object": "error", "message": "old"}) == "old"
    assert a.error_text({"object": "error"}) == "{'object': 'error'}"
    assert a.error_text({"object": "error", "message": "m", "error": {"message": "new"}}) == "new"
    assert a.error_text({"error": {"code": 1}}) == "{'code': 1}"
    assert a.error_text({"detail": "d"}) == "d"
    assert a.error_text({"error": "e", "detail": "d"}) == "e"


@pytest.mark.parametrize("body, want", [
    (b"x" * 300, "x" * 300), (b"x" * 301, "x" * 300 + "..."), ("a\n\t b  ", "a b"), (b"\xff", "\ufffd"),
    (None, "None"),
])
def test_snippet(body, want):
    assert a.snippet(body) == want


def test_snippet_limit():
    assert a.snippet(b"abcd", 4) == "abcd" and a.snippet(b"abcde", 4) == "abcd..."


def test_backend_error_answer_of_a_refused_key_quotes_the_engine():
    status, body = a.backend_error_answer(401, b"")
    assert status == 502 and json.loads(body) == {"error": {
        "message": "the backends refused the proxy's key (HTTP 401): the engines' key (vllm_api_key) is not theirs",
        "type": "BadGatewayError", "code": 502}}
    status, body = a.backend_error_answer(403, b"no " * 100)
    message = json.loads(body)["error"]["message"]
    assert message == ("the backends refused the proxy's key (HTTP 403: %s...): the engines' key (vllm_api_key) is "
                       "not theirs" % ("no " * 100)[:200])
    status, body = a.backend_error_answer(401, b'{"detail": "Unauthorized"}')
    assert json.loads(body)["error"]["message"].startswith("the backends refused the proxy's key (HTTP 401: "
                                                           "Unauthorized)")


def test_backend_error_answer_keeps_the_engines_fields():
    body = '{"object": "error", "message": "zu lang é", "type": "LengthError", "param": "max_tokens", "code": "x"}'
    status, got = a.backend_error_answer(400, body.encode())
    assert status == 400 and "é".encode() in got
    assert json.loads(got) == {"error": {"message": "zu lang é", "type": "LengthError", "param": "max_tokens",
                                         "code": "x"}}
    status, got = a.backend_error_answer(404, b'{"detail": "no such model"}')
    assert json.loads(got) == {"error": {"message": "no such model", "type": "invalid_request_error",
                                         "param": None, "code": 404}}
    status, got = a.backend_error_answer(418, b'{"detail": "teapot"}')
    assert json.loads(got)["error"]["type"] == "BadRequestError"


def test_backend_error_answer_of_a_json_object_that_is_no_error_quotes_it():
    status, got = a.backend_error_answer(400, b'{"foo": 1}')
    assert json.loads(got) == {"error": {"message": '{"foo": 1}', "type": "BadRequestError", "param": None,
                                         "code": 400}}


def test_backend_error_answer_of_a_long_text_keeps_a_thousand_characters():
    status, got = a.backend_error_answer(400, "é".encode() * 1001)
    assert json.loads(got)["error"]["message"] == "é" * 1000 + "..." and "é".encode() in got
    status, got = a.backend_error_answer(400, b"y" * 1000)
    assert json.loads(got)["error"]["message"] == "y" * 1000


def test_error_text_of_the_older_vllm_shape_with_an_error_field_too():
    got = a.backend_error_answer(400, b'{"object": "error", "message": "old", "error": "new"}')[1]
    assert json.loads(got)["error"]["message"] == "new"


def test_sse_error_tail_without_previous_bytes_and_with_text():
    assert a.sse_error_tail("cut") == (b'data: {"error": {"message": "cut", "type": "BadGatewayError", "code": 502}}'
                                       b"\n\ndata: [DONE]\n\n")
    assert a.sse_error_tail("coupé", b"x").startswith(b'\n\ndata: {"error": {"message": "coup\xc3\xa9"')


def test_sse_event_keeps_unicode_as_it_is():
    assert a.sse_event({"t": "é"}) == b'data: {"t": "\xc3\xa9"}\n\n'


def test_done_tracker_starts_empty_and_keeps_a_short_tail():
    t = a.DoneTracker()
    assert (t.tail, t.done, t.data) == (b"", False, False)
    assert t.done is False and t.data is False
    t.feed(b"data: [DONE]")
    assert t.done is True and t.tail == b"data: [DONE]"
    t = a.DoneTracker()
    t.feed(b"0123456789abcdefghijklmnopqrstuvwxyz")
    assert t.tail == b"klmnopqrstuvwxyz" and not t.done
    t.feed(b"")
    assert t.tail == b"klmnopqrstuvwxyz"


def test_scrub_replaces_the_longest_host_first():
    assert a.scrub_addresses("at fe80::1%eth0 now", ("fe80::1", "fe80::1%eth0")) == "at [address hidden] now"
    assert a.scrub_addresses("at a%fe80::1 now", ("fe80::1", "a%fe80::1")) == "at [address hidden] now"
    assert a.scrub_addresses("at node-1 now", ("", None, "node-1")) == "at [address hidden] now"


def test_scrub_body_of_bytes_and_of_text():
    assert a.scrub_body(b"bad \xff at node-1:80", ["node-1"]) == "bad \ufffd at [address hidden]".encode()
    assert a.scrub_body("é at node-1", ["node-1"]) == "é at [address hidden]".encode()
    assert a.scrub_body(b"node-1") == b"node-1"


def test_forwardable_request_keeps_unicode_when_it_rewrites():
    body = json.dumps({"prompt": "é", "kv_transfer_params": {}}).encode()
    request, forwarded, dropped = a.forwardable_request(body)
    assert dropped is True and forwarded == b'{"prompt": "\xc3\xa9"}'


def test_send_bytes_sends_a_start_and_one_body():
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(a.send_bytes(send, 201, b"abc", b"text/plain", [(b"x-a", b"1")]))
    assert sent == [{"type": "http.response.start", "status": 201,
                     "headers": [(b"content-type", b"text/plain"), (b"content-length", b"3"), (b"x-a", b"1")]},
                    {"type": "http.response.body", "body": b"abc", "more_body": False}]
    sent.clear()
    asyncio.run(a.send_json(send, 200, {"t": "é"}))
    assert sent[0]["headers"] == [(b"content-type", b"application/json"), (b"content-length", b"11")]
    assert sent[1]["body"] == b'{"t": "\xc3\xa9"}'
