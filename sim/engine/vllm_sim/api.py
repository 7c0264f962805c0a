"""OpenAI-compatible HTTP API (stdlib ThreadingHTTPServer, HTTP/1.1 keep-alive)."""

import json
import select
import socket
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vllm_sim.auth import UNAUTHORIZED_BODY, authorized
from vllm_sim.dpgroup import GroupStalled
from vllm_sim.engine import GenRequest
from vllm_sim.logutil import api_log, engine_log, raw

HANG_POLL_S = 0.5  # how often a hung request checks the fault file and its client socket

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 500: "Internal Server Error"}


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, ctx):
        self.ctx = ctx
        super().__init__(addr, Handler, bind_and_activate=False)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, socket.timeout, BrokenPipeError)):
            return  # client went away (e.g. gave up while the engine was starting)
        super().handle_error(request, client_address)

    def bind_and_listen(self):
        # Like vLLM: the API socket is bound before the engine starts; clients
        # that connect early wait in the backlog until serving begins.
        self.server_bind()
        self.server_activate()


def error_body(message, etype, code, param=None):
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, fmt, *args):  # silence BaseHTTPRequestHandler
        pass

    def _access(self, code):
        if not self.server.ctx.disable_access_log:
            raw(f"(APIServer pid={self.server.ctx.pid}) INFO:     {self.client_address[0]}:"
                f"{self.client_address[1]} - \"{self.command} {self.path} HTTP/1.1\" {code} "
                f"{REASONS.get(code, '')}")

    def _send(self, code, body, ctype="application/json"):
        if isinstance(body, (dict, list)):
            data = json.dumps(body, ensure_ascii=False).encode()
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body or b""
        self.send_response(code, REASONS.get(code))
        if data or code != 200 or ctype != "application/json":
            self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self._access(code)

    def _read_body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _refused(self):
        """vLLM's API key middleware (auth.py), before any routing: True when it answered 401."""
        if authorized(self.command, self.path, self.headers.get("authorization"), self.server.ctx.api_tokens):
            return False
        if self.command == "POST":
            self._read_body()   # the connection stays usable (keep-alive)
        self._send(401, UNAUTHORIZED_BODY)
        return True

    # ------------------------------------------------------------------ routing
    def do_GET(self):
        ctx = self.server.ctx
        if self._refused():
            return None
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self._send(200, b"")
        if path == "/ping":
            return self._send(200, b"")
        if path == "/version":
            return self._send(200, {"version": ctx.version})
        if path == "/v1/models":
            now = int(ctx.start_time)
            data = [{"id": n, "object": "model", "created": now, "owned_by": "vllm", "root": ctx.model,
                     "parent": None, "max_model_len": ctx.max_model_len,
                     "permission": [{"id": f"modelperm-{uuid.uuid4().hex[:16]}", "object": "model_permission",
                                     "created": now, "allow_create_engine": False, "allow_sampling": True,
                                     "allow_logprobs": True, "allow_search_indices": False,
                                     "allow_view": True, "allow_fine_tuning": False, "organization": "*",
                                     "group": None, "is_blocking": False}]}
                    for n in ctx.served_names]
            return self._send(200, {"object": "list", "data": data})
        if path == "/metrics":
            return self._send(200, ctx.engine.prometheus(), "text/plain; version=0.0.4; charset=utf-8")
        if path in ("/v1/completions", "/v1/chat/completions"):
            return self._send(405, {"detail": "Method Not Allowed"})
        return self._send(404, {"detail": "Not Found"})

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        if self._refused():
            return None
        path = self.path.split("?", 1)[0]
        if path in ("/v1/completions", "/v1/chat/completions"):
            return self._generate(chat=path.endswith("chat/completions"))
        self._read_body()
        if path in ("/health", "/v1/models", "/metrics", "/version"):
            return self._send(405, {"detail": "Method Not Allowed"})
        return self._send(404, {"detail": "Not Found"})

    # ------------------------------------------------------------------ generation
    def _generate(self, chat):
        ctx = self.server.ctx
        raw_body = self._read_body()
        try:
            body = json.loads(raw_body or b"null")
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
        except ValueError as e:
            return self._send(400, error_body(f"JSON decode error: {e}", "BadRequestError", 400))
        model = body.get("model")
        if model is not None and model not in ctx.served_names:
            return self._send(404, error_body(f"The model `{model}` does not exist.", "NotFoundError", 404,
                                              "model"))
        model_name = model or ctx.served_names[0]
        base_id = self.headers.get("x-request-id") or uuid.uuid4().hex
        try:
            if chat:
                prompt, user_text = self._chat_prompt(body)
                request_id = f"chatcmpl-{base_id}"
            else:
                prompt, user_text = self._completion_prompt(body)
                request_id = f"cmpl-{base_id}-0"
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
                raise ValueError(f"max_tokens must be at least 1, got {max_tokens}.")
        except ValueError as e:
            return self._send(400, error_body(str(e), "BadRequestError", 400))
        stream = bool(body.get("stream", False))
        sopts = body.get("stream_options") or {}
        req = GenRequest(kind="chat" if chat else "completion", request_id=request_id, prompt_text=prompt,
                         user_text=user_text, max_tokens=max_tokens, stream=stream,
                         kv_params=body.get("kv_transfer_params"))
        if ctx.log_requests:
            api_log.info("logger.py:40", "Received request %s: prompt_len=%d chars, max_tokens=%s, stream=%s, "
                         "kv_transfer_params=%s", request_id, len(prompt), max_tokens, stream,
                         json.dumps(req.kv_params) if req.kv_params else None)
        if ctx.faults.engine_hung(ctx.start_time, ctx.port) and self._hang(request_id):
            return  # the client gave up on the hung engine: nothing is ever sent
        eng = ctx.engine
        eng.acquire()
        state = {"done": False}

        def done(out):
            # Stats are recorded when the engine produced the output, i.e. before
            # the last bytes reach the client (a /metrics read right after sees them).
            if not state["done"]:
                state["done"] = True
                eng.release()
                if out is not None:
                    eng.finish(req, out)

        try:
            if stream:
                self._stream(req, model_name, chat, bool(sopts.get("include_usage")),
                             bool(sopts.get("continuous_usage_stats")), done)
            else:
                out = eng.prefill(req)
                if out.error:
                    done(out)
                    status, msg, etype = out.error
                    return self._send(status, error_body(msg, etype, status))
                time.sleep(out.token_delay * len(out.pieces))
                eng.step()
                done(out)
                if ctx.faults.engine_stalled(ctx.start_time, ctx.port):
                    return self._send_stalled(request_id, self._full_response(req, out, model_name, chat))
                self._send(200, self._full_response(req, out, model_name, chat))
        except GroupStalled:
            # the engine died under the request (vLLM answers an EngineDeadError with an empty 500, then stops)
            self.close_connection = True
            if not stream:   # a stream's status line went out already: it ends without [DONE]
                self._send(500, b"", "text/plain")
        finally:
            done(None)

    # ------------------------------------------------------------------ engine_hang fault
    def _hang(self, request_id, key="engine_hang"):
        """The engine_hang fault (faults.py): the request was accepted, but nothing is sent, not even
        a status line, while the fault holds. The thread wakes every HANG_POLL_S to look at the fault
        file and the client socket. Returns True when the client closed the connection (the request
        ends without an answer), False when the fault was cleared (the request then runs normally).
        A hung request counts in vllm:num_requests_running, as a request stuck in a real engine does.
        key="engine_stall": the same wait in the middle of an answer (after its first part was sent)."""
        ctx = self.server.ctx
        stats = ctx.engine.stats
        engine_log.debug("a3sim_faults.py:1", "%s: request %s accepted, no more answer while the fault "
                         "holds", key, request_id)
        with stats.lock:
            stats.running += 1
        try:
            while ctx.faults.engine_hung(ctx.start_time, ctx.port, key):
                if self._client_gone(HANG_POLL_S):
                    self.close_connection = True
                    engine_log.debug("a3sim_faults.py:1", "%s: client of %s went away", key, request_id)
                    return True
            engine_log.debug("a3sim_faults.py:1", "%s cleared: request %s resumes", key, request_id)
            return False
        finally:
            with stats.lock:
                stats.running -= 1

    def _send_stalled(self, request_id, body):
        """The engine_stall fault on a non-stream answer: the status line, the headers and half of the body, then
        nothing while the fault holds (the rest follows when it is cleared)."""
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(200, REASONS.get(200))
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:len(data) // 2])
        self.wfile.flush()
        self._access(200)
        if not self._hang(request_id, "engine_stall"):
            self.wfile.write(data[len(data) // 2:])

    def _client_gone(self, timeout):
        """Wait up to `timeout` s; True if the client closed or reset the connection meanwhile."""
        start = time.monotonic()
        try:
            readable, _unused, _unused = select.select([self.connection], [], [], timeout)
            if not readable:
                return False
            data = self.connection.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return True
        if not data:
            return True
        # The client sent more bytes (a pipelined request): still connected; wait out the interval.
        time.sleep(max(0.0, timeout - (time.monotonic() - start)))
        return False

    @staticmethod
    def _content_text(content):
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = []
            for p in content:
                if isinstance(p, dict) and p.get("type") == "text":
                    parts.append(str(p.get("text", "")))
                elif isinstance(p, str):
                    parts.append(p)
            return "\n".join(parts)
        raise ValueError("message content must be a string or a list of content parts")

    def _chat_prompt(self, body):
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]")
        parts = ["[gMASK]<sop>"]
        user_text = ""
        for m in msgs:
            if not isinstance(m, dict) or "role" not in m:
                raise ValueError("each message must be an object with a role")
            text = self._content_text(m.get("content"))
            parts.append(f"<|{m['role']}|>\n{text}")
            if m["role"] == "user":
                user_text = text
        parts.append("<|assistant|>")
        return "".join(parts), user_text

    @staticmethod
    def _completion_prompt(body):
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            if not prompt:
                raise ValueError("prompt must not be empty")
            first = prompt[0]
            if isinstance(first, int):
                prompt = "".join(f" t{t}" for t in prompt)
            elif isinstance(first, list):
                prompt = "".join(f" t{t}" for t in first)
            else:
                prompt = str(first)
        if not isinstance(prompt, str):
            raise ValueError("[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]")
        return prompt, prompt

    @staticmethod
    def _usage(out):
        n = len(out.pieces)
        return {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens + n,
                "completion_tokens": n, "prompt_tokens_details": None}

    def _full_response(self, req, out, model_name, chat):
        created = int(time.time())
        text = "".join(out.pieces)
        if chat:
            body = {"id": req.request_id, "object": "chat.completion", "created": created, "model": model_name,
                    "choices": [{"index": 0,
                                 "message": {"role": "assistant", "content": text, "refusal": None,
                                             "annotations": None, "audio": None, "function_call": None,
                                             "tool_calls": [], "reasoning_content": None},
                                 "logprobs": None, "finish_reason": out.finish_reason, "stop_reason": None}],
                    "service_tier": None, "system_fingerprint": None, "usage": self._usage(out),
                    "prompt_logprobs": None, "prompt_token_ids": None,
                    "kv_transfer_params": out.kv_transfer_params}
        else:
            body = {"id": req.request_id, "object": "text_completion", "created": created, "model": model_name,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": out.finish_reason,
                                 "stop_reason": None, "prompt_logprobs": None}],
                    "service_tier": None, "system_fingerprint": None, "usage": self._usage(out),
                    "kv_transfer_params": out.kv_transfer_params}
        return body

    # ------------------------------------------------------------------ streaming
    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, obj):
        self._chunk(b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")

    def _stream(self, req, model_name, chat, include_usage, continuous, done):
        eng = self.server.ctx.engine
        self.send_response(200, "OK")
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)
        out = None
        try:
            out = eng.prefill(req)
            created = int(time.time())
            obj = "chat.completion.chunk" if chat else "text_completion"
            if out.error:
                status, msg, etype = out.error
                self._event(error_body(msg, etype, status))
            else:
                if chat:
                    first = {"id": req.request_id, "object": obj, "created": created, "model": model_name,
                             "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "logprobs": None, "finish_reason": None}]}
                    if continuous:
                        first["usage"] = {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens,
                                          "completion_tokens": 0}
                    self._event(first)
                last = len(out.pieces) - 1
                for i, piece in enumerate(out.pieces):
                    time.sleep(out.token_delay)
                    eng.step()
                    fr = out.finish_reason if i == last else None
                    if chat:
                        choice = {"index": 0, "delta": {"content": piece}, "logprobs": None,
                                  "finish_reason": fr, "stop_reason": None}
                    else:
                        choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": fr,
                                  "stop_reason": None}
                    ev = {"id": req.request_id, "object": obj, "created": created, "model": model_name,
                          "choices": [choice]}
                    if continuous:
                        ev["usage"] = {"prompt_tokens": out.prompt_tokens,
                                       "total_tokens": out.prompt_tokens + i + 1, "completion_tokens": i + 1}
                    if i == last and out.kv_transfer_params:
                        ev["kv_transfer_params"] = out.kv_transfer_params
                    self._event(ev)
                    if i == 0 and self.server.ctx.faults.engine_stalled(self.server.ctx.start_time,
                                                                        self.server.ctx.port):
                        self.wfile.flush()
                        if self._hang(req.request_id, "engine_stall"):
                            done(out)
                            return
                if include_usage:
                    u = self._usage(out)
                    u.pop("prompt_tokens_details", None)
                    self._event({"id": req.request_id, "object": obj, "created": created, "model": model_name,
                                 "choices": [], "usage": u})
            done(out)
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
            done(out)
