# -*- coding: utf-8 -*-
"""A stand-in for vllm-ascend 0.18.0's load_balance_proxy_server_example.py (the upstream proxy script the
wrapper roles/proxy/files/a3_proxy.py runs), for the live tests of the fast suite (test_proxy_live.py).

The real script comes with the vllm-ascend source distribution, which only the simulated cluster's build
downloads; tests/sim/test_honest_proxy.py runs the wrapper around it, and checks that this stand-in keeps its
interface. Here, what the wrapper uses of it, written small:

* the module's names: parse_args() (its options, its host and port count check, prefiller_instances and
  decoder_instances), app (FastAPI, with the lifespan that builds proxy_state), ProxyState, ServerState,
  proxy_state and global_args;
* ServerState: host, port, url, an httpx.AsyncClient on http://host:port/v1 without a timeout, the load counts;
* ProxyState: least-load selection (select_prefiller/select_decoder book a score), the releases by index that
  do nothing past the list's end, add_/remove_prefillers/decoders (tainting while requests are open), aborts;
* a completion: select a prefill, POST it the request with max_tokens 1 and kv_transfer_params (retried on
  httpx's errors, Authorization "Bearer $OPENAI_API_KEY" and X-Request-Id), release it, select a decode, and
  answer with a StreamingResponse of the decode's bytes (blank chunks skipped); an exception of the decode
  stream ends that response, so a decode that fails before its first byte gives an empty 200, as upstream.
"""

import argparse
import asyncio
import functools
import os
import uuid
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

global_args = None
proxy_state = None


class ServerState:
    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.url = "http://%s:%s/v1" % ("[%s]" % host if ":" in str(host) else host, port)
        self.client = httpx.AsyncClient(timeout=None, base_url=self.url)
        self.active_tokens = 0
        self.active_kv_cache = 0
        self.active_requests = 0
        self.aborted_requests = set()

    def _key(self):
        return (str(self.host).replace("localhost", "0.0.0.0").replace("127.0.0.1", "0.0.0.0"), str(self.port))

    def __eq__(self, other):
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "%s:%s" % (self.host, self.port)


class ProxyState:
    def __init__(self, prefiller_instances, decoder_instances):
        self.request_num = 0
        self.tainted_prefillers = []
        self.tainted_decoders = []
        self.prefillers = [ServerState(h, p) for h, p in prefiller_instances]
        self.decoders = [ServerState(h, p) for h, p in decoder_instances]

    # selection: the least loaded server that is not tainted, ties to the lower index
    def _pick(self, servers, tainted, prefill):
        best = None
        for index, server in enumerate(servers):
            load = server.active_tokens + (0.3 * server.active_kv_cache if prefill else 0)
            load = 1e15 if server in tainted else load
            if best is None or load < best[0]:
                best = (load, index)
        if best is None:
            raise RuntimeError("No %s servers available" % ("prefiller" if prefill else "decoder"))
        return best[1]

    def _update_prefiller_priority(self, server_idx):
        pass

    def _update_decoder_priority(self, server_idx):
        pass

    def select_prefiller(self, token_count):
        chosen = self._pick(self.prefillers, self.tainted_prefillers, True)
        self.prefillers[chosen].active_tokens += token_count
        self.prefillers[chosen].active_kv_cache += token_count
        return chosen

    def select_decoder(self, token_count):
        chosen = self._pick(self.decoders, self.tainted_decoders, False)
        self.decoders[chosen].active_tokens += token_count
        return chosen

    def release_prefiller(self, idx, token_count):
        if idx < len(self.prefillers):
            self.prefillers[idx].active_tokens -= token_count

    def release_prefiller_kv(self, idx, token_count):
        if idx < len(self.prefillers) and self.prefillers[idx].active_kv_cache > 0:
            self.prefillers[idx].active_kv_cache -= token_count

    def release_decoder(self, idx, token_count):
        if idx < len(self.decoders):
            self.decoders[idx].active_tokens -= token_count

    def abort_prefiller_request(self, server_idx, request_id):
        if server_idx < len(self.prefillers):
            self.prefillers[server_idx].aborted_requests.add(request_id)

    def acquire_aborted_prefiller_requests(self, server_idx):
        if server_idx >= len(self.prefillers):
            return set()
        aborted = set(self.prefillers[server_idx].aborted_requests)
        self.prefillers[server_idx].aborted_requests.clear()
        return aborted

    async def next_req_id(self):
        return str(uuid.uuid4())

    def calculate_prefill_scores(self, request_length):
        return request_length / 4.0 * 0.0345 + 120.0745

    def calculate_decode_scores(self, request_length):
        return request_length

    # rotation
    def _add(self, servers, tainted, instances):
        for server in instances:
            if server in tainted:
                tainted.remove(server)
            elif server not in servers:
                servers.append(server)

    def add_prefillers(self, instances):
        self._add(self.prefillers, self.tainted_prefillers, instances)

    def add_decoders(self, instances):
        self._add(self.decoders, self.tainted_decoders, instances)

    def _remove(self, attr, tainted, instances):
        if not instances:
            return False
        if self.request_num > 0:
            tainted.extend(s for s in getattr(self, attr) if s in instances and s not in tainted)
            return True
        setattr(self, attr, [s for s in getattr(self, attr) if s not in set(instances)])
        return False

    def remove_prefillers(self, instances):
        return self._remove("prefillers", self.tainted_prefillers, instances)

    def remove_decoders(self, instances):
        return self._remove("decoders", self.tainted_decoders, instances)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", type=str, default="localhost")
    parser.add_argument("--prefiller-hosts", type=str, nargs="+", default=["localhost"])
    parser.add_argument("--prefiller-ports", type=int, nargs="+", default=[8001])
    parser.add_argument("--decoder-hosts", type=str, nargs="+", default=["localhost"])
    parser.add_argument("--decoder-ports", type=int, nargs="+", default=[8002])
    parser.add_argument("--max-retries", type=int, default=3)
    parser.add_argument("--retry-delay", type=float, default=0.001)
    parser.add_argument("--max-waiting-retries", type=int, default=3)
    parser.add_argument("--waiting-retry-interval", type=float, default=10)
    args = parser.parse_args()
    if len(args.prefiller_hosts) != len(args.prefiller_ports):
        raise ValueError("Number of prefiller hosts must match number of prefiller ports")
    if len(args.decoder_hosts) != len(args.decoder_ports):
        raise ValueError("Number of decoder hosts must match number of decoder ports")
    args.prefiller_instances = list(zip(args.prefiller_hosts, args.prefiller_ports))
    args.decoder_instances = list(zip(args.decoder_hosts, args.decoder_ports))
    return args


@asynccontextmanager
async def lifespan(app):
    global proxy_state
    proxy_state = ProxyState(global_args.prefiller_instances, global_args.decoder_instances)
    yield
    for server in proxy_state.prefillers + proxy_state.decoders:
        await server.client.aclose()


def with_cancellation(handler):
    @functools.wraps(handler)
    async def wrapper(*args, **kwargs):
        request = kwargs["request"]

        async def disconnected():
            while (await request.receive())["type"] != "http.disconnect":
                pass

        work, watch = asyncio.ensure_future(handler(*args, **kwargs)), asyncio.ensure_future(disconnected())
        done, pending = await asyncio.wait([work, watch], return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return work.result() if work in done else None
    return wrapper


app = FastAPI(lifespan=lifespan)


def _headers(request_id):
    return {"Authorization": "Bearer %s" % os.environ.get("OPENAI_API_KEY"), "X-Request-Id": request_id}


async def _prefill(client, prefiller_id, endpoint, req_data, request_id):
    req_data = dict(req_data, stream=False, max_tokens=1, min_tokens=1, kv_transfer_params={
        "do_remote_decode": True, "do_remote_prefill": False,
        "aborted_request": sorted(proxy_state.acquire_aborted_prefiller_requests(prefiller_id))})
    req_data.pop("stream_options", None)
    for attempt in range(1, global_args.max_retries + 1):
        try:
            response = await client.post(endpoint, json=req_data, headers=_headers(request_id))
            response.raise_for_status()
            return response
        except (httpx.RequestError, httpx.HTTPStatusError):
            if attempt == global_args.max_retries:
                raise
            await asyncio.sleep(global_args.retry_delay * 2 ** (attempt - 1))


async def _decode_stream(client, endpoint, req_data, request_id):
    for attempt in range(1, global_args.max_retries + 1):
        try:
            async with client.stream("POST", endpoint, json=req_data, headers=_headers(request_id)) as response:
                response.raise_for_status()
                async for chunk in response.aiter_bytes():
                    yield chunk
                return
        except (httpx.RequestError, httpx.HTTPStatusError):
            if attempt == global_args.max_retries:
                raise
            await asyncio.sleep(global_args.retry_delay * 2 ** (attempt - 1))


async def _completions(api, request):
    try:
        proxy_state.request_num += 1
        req_data = await request.json()
        length = len(await request.body())
        request_id = await proxy_state.next_req_id()
        p_score = proxy_state.calculate_prefill_scores(length)
        p_idx = proxy_state.select_prefiller(p_score)
        prefiller = proxy_state.prefillers[p_idx]
        response = await _prefill(prefiller.client, p_idx, api, req_data, request_id)
        proxy_state.release_prefiller(p_idx, p_score)
        kv = response.json().get("kv_transfer_params", {})
        if kv:
            req_data["kv_transfer_params"] = kv
        d_score = proxy_state.calculate_decode_scores(length)
        d_idx = proxy_state.select_decoder(d_score)
        decoder = proxy_state.decoders[d_idx]

        async def generate():
            released = False
            try:
                async for chunk in _decode_stream(decoder.client, api, req_data, request_id):
                    if not released and chunk:
                        proxy_state.release_prefiller_kv(p_idx, p_score)
                        released = True
                    if not chunk.strip():
                        continue
                    yield chunk
            except Exception:  # as upstream: the error is logged there, the client's answer just ends
                proxy_state.abort_prefiller_request(p_idx, request_id)
                proxy_state.release_prefiller_kv(p_idx, p_score)
            proxy_state.release_decoder(d_idx, d_score)

        media = "text/event-stream; charset=utf-8" if req_data.get("stream") else "application/json"
        return StreamingResponse(generate(), media_type=media)
    finally:
        proxy_state.request_num -= 1


@app.post("/v1/completions")
@with_cancellation
async def handle_completions(request: Request):
    return await _completions("/completions", request)


@app.post("/v1/chat/completions")
@with_cancellation
async def handle_chat_completions(request: Request):
    return await _completions("/chat/completions", request)


@app.get("/healthcheck")
async def healthcheck():
    return {"status": "ok", "prefill_instances": len(proxy_state.prefillers),
            "decode_instances": len(proxy_state.decoders)}


async def _adjust(mode, request):
    data = await request.json()
    kind, names = data.get("type", ""), data.get("instances", [])
    servers = [ServerState(n.rsplit(":", 1)[0], int(n.rsplit(":", 1)[1])) for n in
               ([names] if isinstance(names, str) else names)]
    if kind not in ("prefill", "decode"):
        return {"error": "Instance type %s is not supported." % kind}
    if mode == "add":
        (proxy_state.add_prefillers if kind == "prefill" else proxy_state.add_decoders)(servers)
    else:
        (proxy_state.remove_prefillers if kind == "prefill" else proxy_state.remove_decoders)(servers)
    return {"message": "%s %s instances: %s." % (mode, kind, [str(s) for s in servers]),
            "current_prefill_instances": [str(s) for s in proxy_state.prefillers],
            "current_decode_instances": [str(s) for s in proxy_state.decoders]}


@app.post("/instances/add")
async def handle_add_instances(request: Request):
    return await _adjust("add", request)


@app.post("/instances/remove")
async def handle_remove_instances(request: Request):
    return await _adjust("remove", request)
