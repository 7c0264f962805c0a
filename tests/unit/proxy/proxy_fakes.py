# -*- coding: utf-8 -*-
"""Helpers of the honest proxy's unit tests: an ASGI driver and a stand-in for the upstream script (its ProxyState
and ServerState, as v0.18.0 behaves), and the package (roles/proxy/files/a3proxy) on the path.

Plain Python: no fastapi, httpx or uvicorn. The wrapper's live path (its process, the uvicorn listeners, the httpx
prober and forwarding, with a stand-in upstream script) is tested in test_proxy_live.py; the behaviour around the
real upstream script in tests/sim/test_honest_proxy.py.
"""
from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

FILES = Path(__file__).resolve().parents[3] / "roles" / "proxy" / "files"
if str(FILES) not in sys.path:
    sys.path.insert(0, str(FILES))


def asgi(app, method, path, body=b"", headers=(), chunks=None, hang_after=False):
    """Drive an ASGI app with one request: body (or chunks, sent as a chunked body would be) and headers
    ({name: value} or pairs). hang_after: receive() never returns once the body was given (a client that stops
    sending). Returns (status, {header: value}, body bytes, every message sent)."""
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
    scope = {"type": "http", "method": method, "path": path, "asgi": {"version": "3.0"},
             "headers": [(k.lower().encode(), v.encode()) for k, v in pairs]}
    parts = list(chunks) if chunks is not None else [body]
    messages = [{"type": "http.request", "body": part, "more_body": i < len(parts) - 1 or hang_after}
                for i, part in enumerate(parts)]
    sent = []

    async def receive():
        if messages:
            return messages.pop(0)
        if hang_after:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def run():
        await app(scope, receive, send)

    asyncio.run(run())
    start = sent[0]
    return (start["status"], dict((k.decode(), v.decode()) for k, v in start["headers"]),
            b"".join(m.get("body", b"") for m in sent[1:]), sent)


class FakeServer(object):
    """The upstream's ServerState: host, port, its load counts and an httpx-like client."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.active_tokens = 0.0
        self.active_kv_cache = 0.0
        self.client = types.SimpleNamespace(event_hooks={})

    def __repr__(self):
        return "%s:%s" % (self.host, self.port)


class FakeProxyState(object):
    """The upstream's ProxyState as far as the wrapper uses it: selection by the lowest load (ties to the lower
    index), releases by index that do nothing for an index past the list's end (as v0.18.0), removal, aborts."""

    def __init__(self, prefills, decodes):
        self.prefillers = [FakeServer(h, p) for h, p in prefills]
        self.decoders = [FakeServer(h, p) for h, p in decodes]
        self.tainted_prefillers, self.tainted_decoders = [], []
        self.aborted = []

    def _pick(self, servers, prefill):
        loads = [s.active_tokens + (0.3 * s.active_kv_cache if prefill else 0) for s in servers]
        return loads.index(min(loads))

    def select_prefiller(self, score):
        i = self._pick(self.prefillers, True)
        self.prefillers[i].active_tokens += score
        self.prefillers[i].active_kv_cache += score
        return i

    def select_decoder(self, score):
        i = self._pick(self.decoders, False)
        self.decoders[i].active_tokens += score
        return i

    def release_prefiller(self, idx, n):
        if idx < len(self.prefillers):
            self.prefillers[idx].active_tokens -= n

    def release_prefiller_kv(self, idx, n):
        if idx < len(self.prefillers) and self.prefillers[idx].active_kv_cache > 0:
            self.prefillers[idx].active_kv_cache -= n

    def release_decoder(self, idx, n):
        if idx < len(self.decoders):
            self.decoders[idx].active_tokens -= n

    def _update_prefiller_priority(self, idx):
        pass

    def _update_decoder_priority(self, idx):
        pass

    def abort_prefiller_request(self, idx, rid):
        self.aborted.append((str(self.prefillers[idx]), rid))

    def remove_decoders(self, servers):
        self.decoders = [s for s in self.decoders if s not in servers]
        return False

    def remove_prefillers(self, servers):
        self.prefillers = [s for s in self.prefillers if s not in servers]
        return False


def fake_upstream(prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), app=None):
    """A stand-in for the upstream module: ServerState, its ProxyState (already built, as after its lifespan),
    global_args and an ASGI app."""
    module = types.SimpleNamespace(ServerState=type("ServerState", (FakeServer,), {}), app=app)
    module.global_args = types.SimpleNamespace(prefiller_instances=list(prefills), decoder_instances=list(decodes))
    module.proxy_state = FakeProxyState(prefills, decodes)
    return module


def options(**changes):
    """The wrapper's options (cli defaults), with changes."""
    from a3proxy import cli
    ours, _unused = cli.split_argv([])
    for name, value in changes.items():
        setattr(ours, name, value)
    return ours
