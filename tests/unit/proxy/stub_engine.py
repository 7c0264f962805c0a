# -*- coding: utf-8 -*-
"""A stub vLLM engine in the test process, the one backend of the proxy's live tests: the fast suite's
test_proxy_live.py (the wrapper around upstream_standin.py) and the sim stage's tests/sim/test_honest_proxy.py
(the wrapper around the real upstream script; it adds this folder to its path). Standard library only, so it runs
in either venv.

StubEngine(role) serves on host (127.0.0.1 unless told), port 0, as a prefill or a decode backend:

* GET /health answers health (200 unless a test sets it) and is counted in health_times; GET /v1/models the model
  list, any other GET 404. With key, every /v1 path needs "Authorization: Bearer <key>" (401 otherwise), as vLLM's
  --api-key.
* A POST to a completions path acts by the mode its prompt names for this role ("p=<mode>" for a prefill,
  "d=<mode>" for a decode; the stub's own mode otherwise, "ok" unless told); max_tokens below 1 is a 400 as vLLM
  gives it. Chat requests get chat answers and events (delta.content), the others text completions (text).

The modes:

  ok       a prefill: an answer with kv_transfer_params; a decode: "hello", or the events "one ", "two ", "three"
           and [DONE]
  nokv     a prefill answer without kv_transfer_params
  nousage  a decode answer without usage
  empty    200 with an empty body
  drop     close the connection without an answer
  hang     no answer at all (until the client closes)
  headers  200 and the headers of a chunked stream, then nothing (until the client closes)
  late     nothing for late_s (longer than the proxy's first-byte timeout), then the ok answer
  slow     a stream whose events come slow_s apart (less than the idle timeout): the whole answer takes longer
           than the first-byte timeout
  hold     one event, then the rest only once the test released the prompt's tag (release(); 5 s at most)
  stall    a stream: one event, then nothing; an answer: its headers (a length of 1000) and a part of its body,
           then nothing (until the client closes)
  cut      one event, then the connection dropped
  nodone   one event, then the stream ends cleanly without [DONE]
  err500   vLLM's JSON 500
  leak400  a 400 whose message names this engine's URL and address
  unauth   vLLM's 401 for a wrong key

"Until the client closes" is bounded by wait_s. Every call but GET /health is recorded in calls: method, path, the
Authorization header (auth, None without), the body, the prompt's tag ("t=<hex>", see prompt()) and the mode; the
modes that wait note whether the client closed the connection meanwhile ("closed"), hold whether the test released
it in time ("released").
"""
from __future__ import annotations

import json
import select
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCAL = "127.0.0.1"
MODEL = "glm-5.1"
WORDS = ("one ", "two ", "three")
USAGE = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}


def prompt(*modes):
    """A prompt with a fresh tag (t=<hex>) and the stub modes ("p=hang", "d=stall", ...)."""
    return " ".join(("t=" + uuid.uuid4().hex[:12],) + modes)


def tag_of(text):
    """The tag (t=<hex>) of a prompt()."""
    return next(w for w in text.split() if w.startswith("t="))


def sse_events(body):
    """The data of each server-sent event in body (bytes), in order."""
    return [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]


def send_json(handler, code, obj):
    """A JSON answer of a BaseHTTPRequestHandler (HTTP/1.1, with a length)."""
    data = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def words_of(body):
    """The words of a request's prompt, or of its first message."""
    text = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    if not text and isinstance(body.get("messages"), list) and body["messages"]:
        text = str(body["messages"][0].get("content", ""))
    return text.split()


def event(text, chat=True):
    """One SSE event of a decode's stream, with text as a chat delta or as a completion's text."""
    piece = {"delta": {"content": text}} if chat else {"text": text}
    chunk = {"id": "cmpl-stub", "object": "chat.completion.chunk" if chat else "text_completion", "model": MODEL,
             "choices": [dict(piece, index=0, finish_reason=None)]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def answer(chat=True, usage=True):
    """A decode's whole answer: "hello"."""
    choice = {"message": {"role": "assistant", "content": "hello"}} if chat else {"text": "hello"}
    out = {"id": "cmpl-stub", "object": "chat.completion" if chat else "text_completion", "model": MODEL,
           "choices": [dict(choice, index=0, finish_reason="stop")]}
    return dict(out, usage=USAGE) if usage else out


def prefill_answer(kv=True):
    """A prefill's answer, with the kv_transfer_params a decode needs unless not kv."""
    out = {"id": "cmpl-stub", "object": "text_completion", "model": MODEL,
           "choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
    if kv:
        out["kv_transfer_params"] = {"do_remote_prefill": True, "remote_engine_id": "0", "remote_block_ids": [1, 2]}
    return out


class _Handler(BaseHTTPRequestHandler):
    """The stub's requests (self.server.stub is the StubEngine); a mode is the method _mode_<name>(body, call)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass

    @property
    def stub(self):
        """The StubEngine this request came to."""
        return self.server.stub

    def _authorized(self):
        return not self.stub.key or self.headers.get("authorization") == "Bearer " + self.stub.key

    def _record(self, method, body=None, words=(), mode=None):
        call = {"method": method, "path": self.path, "auth": self.headers.get("authorization"), "body": body,
                "tag": next((w for w in words if w.startswith("t=")), None), "mode": mode}
        self.stub.calls.append(call)
        return call

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _head(self, content_type, length=None):
        """A 200's status line and headers: with length, a content-length; without, a chunked body."""
        self.send_response(200)
        self.send_header("content-type", content_type)
        if length is None:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(length))
        self.end_headers()
        self.wfile.flush()

    def _start_stream(self):
        self._head("text/event-stream; charset=utf-8")

    def _end_stream(self, done=True):
        if done:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _closed_within(self, seconds):
        """True once the client closed the connection (within seconds, or until the stub stops)."""
        deadline = time.monotonic() + seconds
        while not self.stub.stop_event.is_set() and time.monotonic() < deadline:
            readable, _unused, _unused = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
                time.sleep(0.05)
        return False

    def _client_gone(self, call, seconds=None):
        """Whether the client closed the connection within seconds (the stub's wait_s by default), as call notes;
        once it has, this connection ends."""
        call["closed"] = self._closed_within(self.stub.wait_s if seconds is None else seconds)
        self.close_connection = self.close_connection or call["closed"]
        return call["closed"]

    def _wait_close(self, call):
        """Nothing more: wait for the client to close (wait_s at most); the connection ends."""
        self._client_gone(call)
        self.close_connection = True

    def _drop(self):
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def do_GET(self):  # pylint: disable=invalid-name
        """/health, /v1/models; any other path 404."""
        if self.path == "/health":
            self.stub.health_times.append(time.monotonic())
            return send_json(self, self.stub.health, {})
        self._record("GET")
        if not self._authorized():
            return send_json(self, 401, {"error": "Unauthorized"})
        if self.path == "/v1/models":
            return send_json(self, 200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "owned_by": "vllm", "root": "/models/" + MODEL}]})
        return send_json(self, 404, {"detail": "Not Found"})

    def do_POST(self):  # pylint: disable=invalid-name
        """A completion: recorded, checked (the key, max_tokens), then answered as its mode says."""
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        words = words_of(body)
        mode = next((w[2:] for w in words if w.startswith(self.stub.role[0] + "=")), self.stub.mode)
        call = self._record("POST", body, words, mode)
        if not self._authorized():
            return send_json(self, 401, {"error": "Unauthorized"})
        if isinstance(body.get("max_tokens"), int) and body["max_tokens"] < 1:
            return send_json(self, 400, {"object": "error", "message": f"max_tokens must be at least 1, got "
                                         f"{body['max_tokens']}.", "type": "BadRequestError", "param": None,
                                         "code": 400})
        act = getattr(self, "_mode_" + mode, None)
        if act is None:
            return send_json(self, 500, {"error": {"message": f"unknown stub mode {mode}"}})
        return act(body, call)

    # ------------------------------------------------------------------------- the modes

    def _mode_ok(self, body, _call):
        chat = "messages" in body
        if self.stub.role == "prefill":
            return send_json(self, 200, prefill_answer())
        if not body.get("stream"):
            return send_json(self, 200, answer(chat))
        self._start_stream()
        for word in WORDS:
            self._chunk(event(word, chat))
        return self._end_stream()

    def _mode_nokv(self, _body, _call):
        return send_json(self, 200, prefill_answer(kv=False))

    def _mode_nousage(self, body, _call):
        return send_json(self, 200, answer("messages" in body, usage=False))

    def _mode_empty(self, _body, _call):
        self._head("application/json", 0)

    def _mode_drop(self, _body, _call):
        self._drop()

    def _mode_hang(self, _body, call):
        self._wait_close(call)

    def _mode_headers(self, _body, call):
        self._start_stream()
        self._wait_close(call)

    def _mode_late(self, body, call):
        if not self._client_gone(call, self.stub.late_s):
            self._mode_ok(body, call)

    def _mode_slow(self, body, call):
        self._start_stream()
        for word in WORDS:
            if self._client_gone(call, self.stub.slow_s):
                return
            self._chunk(event(word, "messages" in body))
        self._end_stream()

    def _mode_hold(self, body, call):
        gate = self.stub.gates.setdefault(call["tag"], threading.Event())
        self._start_stream()
        self._chunk(event(WORDS[0], "messages" in body))
        call["released"] = gate.wait(5)
        self._chunk(event("two", "messages" in body))
        self._end_stream()

    def _mode_stall(self, body, call):
        if body.get("stream"):
            self._start_stream()
            self._chunk(event(WORDS[0], "messages" in body))
        else:
            self._head("application/json", 1000)
            self.wfile.write(b'{"id": "cmpl-stub", "choices": [')
            self.wfile.flush()
        self._wait_close(call)

    def _mode_cut(self, body, _call):
        self._start_stream()
        self._chunk(event(WORDS[0], "messages" in body))
        time.sleep(0.1)
        self._drop()

    def _mode_nodone(self, body, _call):
        self._start_stream()
        self._chunk(event(WORDS[0], "messages" in body))
        self._end_stream(done=False)

    def _mode_err500(self, _body, _call):
        send_json(self, 500, {"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}})

    def _mode_leak400(self, _body, _call):
        where = self.stub.key_text
        send_json(self, 400, {"error": {"message": f"bad request at http://{where}/v1/completions (engine {where})",
                                        "type": "BadRequestError", "code": 400}})

    def _mode_unauth(self, _body, _call):
        send_json(self, 401, {"error": "Unauthorized"})  # vLLM's answer to a wrong --api-key


class StubEngine:  # pylint: disable=too-many-instance-attributes
    """An OpenAI-style engine on host as a prefill or a decode backend (see the module's docstring): role
    "prefill" or "decode"; key the engines' API key (None: none needed); mode what a POST does when its prompt
    names none for this role; late_s, slow_s and wait_s the times of the late, slow and waiting modes."""

    def __init__(self, role, key=None, *, host=LOCAL, mode="ok",  # pylint: disable=too-many-arguments
                 late_s=4.0, slow_s=0.6, wait_s=30.0):
        self.role, self.key, self.mode = role, key, mode
        self.late_s, self.slow_s, self.wait_s = late_s, slow_s, wait_s
        self.health = 200
        self.calls = []
        self.health_times = []
        self.gates = {}
        self.stop_event = threading.Event()
        self.server = ThreadingHTTPServer((host, 0), _Handler)
        self.server.daemon_threads = True
        self.server.stub = self
        self.host, self.port = host, self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def key_text(self):
        """host:port, as the proxy names this backend."""
        return f"{self.host}:{self.port}"

    def tagged(self, tag, method="POST"):
        """The calls of the prompt tagged tag (POSTs unless method says otherwise)."""
        return [c for c in self.calls if c["tag"] == tag and c["method"] == method]

    def closed(self):
        """The POSTs whose connection the client closed while this stub waited."""
        return [c for c in self.calls if c.get("closed")]

    def release(self, tag):
        """Let the held answer of the prompt tagged tag go on."""
        self.gates.setdefault(tag, threading.Event()).set()

    def stop(self):
        """Stop serving; what still waits in a handler ends."""
        self.stop_event.set()
        for gate in self.gates.values():
            gate.set()
        self.server.shutdown()
        self.server.server_close()
