#!/usr/bin/env python3
"""Fast fake engines and a load generator for benchmarks/edge_bench.py (standard library only; on uvloop's loop
when the interpreter has it).

The fakes speak the two-step prefill/decode protocol exactly as the simulated engine (sim/engine/vllm_sim) and a
vLLM-Ascend engine with the Mooncake connector do, and cost next to nothing, so that a benchmark measures only what
stands between the clients and them:

* a prefill request carries kv_transfer_params with do_remote_decode: true; the prefill fake answers one token with
  finish_reason "length" and the kv_transfer_params a decode engine needs (do_remote_prefill: true, the remote
  engine id, host, port, block ids and request id);
* a decode request must carry those kv_transfer_params (do_remote_prefill: true, this benchmark's remote_engine_id);
  a decode fake refuses one without them with 400, so a relay that skips or garbles the first step is caught;
* a prefill fake refuses a request without do_remote_decode with 400, so a relay that swaps the roles is caught;
* the decode answer holds max_tokens tokens " w0", " w1", ... with usage, as JSON or as server-sent events (one
  event per token, the usage event when stream_options.include_usage asks for it, then "data: [DONE]");
* GET /health answers 200, GET /v1/models the model, as a vLLM engine does.

  edge_fakes.py serve ROLE:PORT...        run fakes (e.g. prefill:18101 decode:18201) until SIGTERM
  edge_fakes.py load URL CLIENTS SECONDS STREAM MAX_TOKENS [DIRECT]
                                          closed-loop clients on keep-alive connections; prints one JSON line

The load generator checks every answer (status 200, the token order, usage, [DONE] and JSON first and last events on a
stream) and counts a wrong one as an error; its latencies are from sending the request to the last byte of the
answer. Both sides are built to cost a few microseconds per streamed token, less than any relay they measure.
"""
import asyncio
import functools
import json
import re
import signal
import sys
import time

ENGINE_ID = "edge-bench-prefill"
MODEL = "GLM-5.1-w8a8"
PROMPT = "How far is the moon? " * 8


def _json(status, obj, reason=None):
    body = json.dumps(obj).encode()
    head = "HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (
        status, reason or ("OK" if status == 200 else "Bad Request"), len(body))
    return head.encode() + body


def parse_head(head):
    """(start line, {lower-case header name: stripped value}) of an HTTP/1.1 message's head (bytes, without the blank
    line that ends it): what the fakes read of a request and the load generator of an answer."""
    lines = bytes(head).decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _sep, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _error(message):
    return _json(400, {"error": {"message": message, "type": "BadRequestError", "code": 400}})


class Fake(asyncio.Protocol):
    """One connection to a fake engine of one role ("prefill" or "decode")."""

    def __init__(self, role, port):
        self.role, self.port, self.buf, self.transport = role, port, b"", None
        self.blocks = 0

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            start, headers = parse_head(self.buf[:end])
            length, rid = int(headers.get("content-length", 0)), headers.get("x-request-id", "req")
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            method, path = start.split(" ")[:2]
            self.answer(method, path, body, rid)

    def answer(self, method, path, body, rid):
        write = self.transport.write
        if method == "GET":
            if path == "/health":
                write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            elif path == "/v1/models":
                write(_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm",
                                                              "max_model_len": 32768}]}))
            else:
                write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            return
        try:
            req = json.loads(body)
        except ValueError:
            write(_error("the body is not JSON"))
            return
        chat = path.endswith("/chat/completions")
        kv = req.get("kv_transfer_params") or {}
        if self.role == "prefill":
            if not kv.get("do_remote_decode"):
                write(_error("prefill engine: no kv_transfer_params.do_remote_decode"))
                return
            self.blocks += 1
            params = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [self.blocks],
                      "remote_engine_id": ENGINE_ID, "remote_request_id": rid, "remote_host": "127.0.0.1",
                      "remote_port": self.port + 1000, "remote_pcp_size": 1, "remote_dcp_size": 1,
                      "remote_ptp_size": 16, "last_token_id": 7, "num_prompt_blocks": 1}
            write(_json(200, self.full(req, chat, 1, "length", params)))
            return
        if not (kv.get("do_remote_prefill") and kv.get("remote_engine_id") == ENGINE_ID):
            write(_error("decode engine: no kv_transfer_params of a prefill (do_remote_prefill, remote_engine_id)"))
            return
        n = int(req.get("max_tokens") or 16)
        if req.get("stream"):
            self.stream(req, chat, n)
        else:
            write(_json(200, self.full(req, chat, n, "length", None)))

    @staticmethod
    def full(req, chat, n, finish, params):
        text = "".join(" w%d" % i for i in range(n))
        usage = {"prompt_tokens": 40, "completion_tokens": n, "total_tokens": 40 + n}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
            obj = "text_completion"
        return {"id": "cmpl-x", "object": obj, "created": 0, "model": req.get("model", MODEL), "choices": [choice],
                "usage": usage, "kv_transfer_params": params}

    def stream(self, req, chat, n):
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        for block in stream_blocks(chat, n, include_usage):
            self.transport.write(block)


@functools.lru_cache(maxsize=64)
def stream_blocks(chat, n, include_usage):
    """The bytes of one streamed answer (head, one event per token, the usage event when asked, [DONE]) in the
    writes a fake makes: 8 events per write, as a real engine sends its events as they come (several writes per
    answer). The same arguments give the same bytes, so they are made once: what a fake costs per token is then
    the writes alone, not a json.dumps per event."""
    obj = "chat.completion.chunk" if chat else "text_completion"
    blocks, parts = [], [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"transfer-encoding: chunked\r\n\r\n"]

    def event(payload):
        data = b"data: " + json.dumps(payload).encode() + b"\n\n"
        parts.append(b"%x\r\n%s\r\n" % (len(data), data))

    for i in range(n):
        piece = " w%d" % i
        choice = ({"index": 0, "delta": {"content": piece}, "finish_reason": None} if chat
                  else {"index": 0, "text": piece, "finish_reason": None})
        if i == n - 1:
            choice["finish_reason"] = "length"
        event({"id": "cmpl-x", "object": obj, "created": 0, "model": MODEL, "choices": [choice]})
        if len(parts) >= 8:
            blocks.append(b"".join(parts))
            parts.clear()
    if include_usage:
        event({"id": "cmpl-x", "object": obj, "created": 0, "model": MODEL, "choices": [],
               "usage": {"prompt_tokens": 40, "completion_tokens": n, "total_tokens": 40 + n}})
    data = b"data: [DONE]\n\n"
    parts.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
    blocks.append(b"".join(parts))
    return tuple(blocks)


async def serve(specs):
    loop = asyncio.get_running_loop()
    servers = []
    for spec in specs:
        role, port = spec.split(":")
        port = int(port)
        servers.append(await loop.create_server(lambda r=role, p=port: Fake(r, p), "127.0.0.1", port, backlog=4096))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    for server in servers:
        server.close()


# ---------------------------------------------------------------------------------------------- load generator

def request_bytes(host, port, stream, max_tokens, direct):
    body = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if direct:  # straight to a decode engine: the kv_transfer_params a relay would have brought from a prefill
        body["kv_transfer_params"] = {"do_remote_prefill": True, "do_remote_decode": False,
                                      "remote_engine_id": ENGINE_ID, "remote_host": "127.0.0.1",
                                      "remote_port": 1, "remote_block_ids": [1], "remote_request_id": "r"}
    data = json.dumps(body).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (host.encode(), port, len(data), data))


def dechunk(buf, pos):
    """(body, end) of a chunked body that starts at buf[pos], or None while it is incomplete."""
    parts = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b";")[0], 16)
        if size == 0:
            return (b"".join(parts), eol + 4) if len(buf) >= eol + 4 else None
        if len(buf) < eol + 4 + size:
            return None
        parts.append(bytes(buf[eol + 2:eol + 2 + size]))
        pos = eol + 4 + size


class Answer(asyncio.Protocol):
    """One keep-alive client connection: answers come as (status, body) through an asyncio queue. The bytes are
    gathered as they come and parsed once an answer looks complete, so that the load generator's cost per streamed
    token is small next to a relay's (an await per chunk was most of it)."""

    def __init__(self):
        self.buf, self.head, self.answers, self.transport = bytearray(), None, asyncio.Queue(), None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.answers.put_nowait(None)

    def data_received(self, data):
        self.buf += data
        while self.buf:
            if self.head is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                start, headers = parse_head(self.buf[:end])
                chunked = "chunked" in headers.get("transfer-encoding", "").lower()
                self.head = (int(start.split(" ")[1]), end + 4,
                             None if chunked else int(headers.get("content-length", 0)))
            status, start, length = self.head
            if length is None:
                if not self.buf.endswith(b"0\r\n\r\n"):
                    return
                done = dechunk(self.buf, start)
                if done is None:
                    return
                body, end = done
            else:
                if len(self.buf) < start + length:
                    return
                body, end = bytes(self.buf[start:start + length]), start + length
            del self.buf[:end]
            self.head = None
            self.answers.put_nowait((status, body))


PIECE = re.compile(rb'"content":\s*"((?:[^"\\]|\\.)*)"')
COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
DONE = b"data: [DONE]"


@functools.lru_cache(maxsize=8)
def wanted(n):
    return [b" w%d" % i for i in range(n)]


def check(status, body, stream, n):
    """Token count of a right answer, or None. A right answer: status 200; its content pieces, in order, are
    " w0" ... " w<n-1>"; its usage says n completion tokens; a stream ends with "data: [DONE]", and its first and
    last events are JSON (the pieces and the usage are read with two regular expressions over the whole body
    rather than a JSON parse per event, which would cost the load generator more than the relays it measures)."""
    if status != 200 or not body:
        return None
    try:
        if not stream:
            obj = json.loads(body)
            ok = obj["choices"][0]["message"]["content"] == "".join(" w%d" % i for i in range(n)) and \
                obj["usage"]["completion_tokens"] == n
            return n if ok else None
        body = body.rstrip()
        if not body.endswith(DONE):
            return None
        events = body[:-len(DONE)].rstrip().split(b"\n\n")
        for event in (events[0], events[-1]):
            if not event.startswith(b"data: "):
                return None
            json.loads(event[len(b"data: "):])
        usage = COMPLETION_TOKENS.findall(body)
        if not usage or any(int(u) != n for u in usage):
            return None
        return n if PIECE.findall(body) == wanted(n) else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


async def client(host, port, payload, stream, n, deadline, lat, stats):
    loop = asyncio.get_running_loop()
    conn = None
    while time.monotonic() < deadline:
        if conn is None:
            try:
                conn = (await loop.create_connection(Answer, host, port))[1]
            except OSError:
                stats["errors"] += 1
                await asyncio.sleep(0.05)
                continue
        t0 = time.monotonic()
        try:
            conn.transport.write(payload)
            answer = await asyncio.wait_for(conn.answers.get(), 60)
        except (OSError, asyncio.TimeoutError, ValueError):
            answer = None
        if answer is None:
            stats["errors"] += 1
            conn.transport.close()
            conn = None
            continue
        tokens = check(answer[0], answer[1], stream, n)
        if tokens is None:
            stats["errors"] += 1
            continue
        lat.append(time.monotonic() - t0)
        stats["tokens"] += tokens
    if conn is not None:
        conn.transport.close()


async def load(url, clients, seconds, stream, n, direct):
    host, port = url.split("//")[-1].split(":")
    port = int(port)
    payload = request_bytes(host, port, stream, n, direct)
    lat, stats = [], {"errors": 0, "tokens": 0}
    start = time.monotonic()
    await asyncio.gather(*(client(host, port, payload, stream, n, start + seconds, lat, stats)
                           for _client in range(clients)))
    elapsed = time.monotonic() - start
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None

    return {"ok": len(lat), "errors": stats["errors"], "seconds": elapsed, "tokens": stats["tokens"],
            "p50": pct(0.50), "p99": pct(0.99)}


def run(main_coro):
    """asyncio.run, on uvloop's loop when the interpreter has it (edge_bench runs the fakes and the load with its
    venv's python, which has it: a cheaper harness leaves more of the machine to the relay under test)."""
    try:
        import uvloop  # pylint: disable=import-outside-toplevel
    except ImportError:
        return asyncio.run(main_coro)
    return uvloop.run(main_coro)


def main(argv):
    if argv[:1] == ["serve"]:
        run(serve(argv[1:]))
        return 0
    if argv[:1] == ["load"]:
        url, clients, seconds, stream, n = argv[1], int(argv[2]), float(argv[3]), argv[4] == "1", int(argv[5])
        direct = len(argv) > 6 and argv[6] == "1"
        print(json.dumps(run(load(url, clients, seconds, stream, n, direct))), flush=True)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
