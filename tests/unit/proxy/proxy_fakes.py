# -*- coding: utf-8 -*-
"""Helpers of the honest proxy's unit tests: an ASGI driver, a stand-in for the upstream module (ServerState
without an HTTP client, and the ProxyState of the stand-in upstream script upstream_standin.py, as v0.18.0
behaves), and the package (roles/proxy/files/a3proxy) on the path.

No request goes over a socket here. The wrapper's live path (its process, the uvicorn listeners, the httpx prober
and forwarding, with the stand-in upstream script) is tested in test_proxy_live.py; the behaviour around the real
upstream script in tests/sim/test_honest_proxy.py.
"""
from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

import upstream_standin

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
    """The upstream's ServerState: host, port, its load counts, its aborted requests and an httpx-like client."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.active_tokens = 0.0
        self.active_kv_cache = 0.0
        self.aborted_requests = set()
        self.client = types.SimpleNamespace(event_hooks={})

    def __repr__(self):
        return "%s:%s" % (self.host, self.port)


class FakeProxyState(upstream_standin.ProxyState):
    """The upstream's ProxyState as the stand-in upstream script has it (upstream_standin.py, which the sim stage
    checks against the real one): selection by the lowest load (ties to the lower index), releases by index that
    do nothing for an index past the list's end (as v0.18.0), add and removal, aborts; over FakeServers, which
    need no HTTP client."""

    def __init__(self, prefills, decodes):
        super().__init__((), ())
        self.prefillers = [FakeServer(h, p) for h, p in prefills]
        self.decoders = [FakeServer(h, p) for h, p in decodes]

    @property
    def aborted(self):
        """(prefill, request id) of each abort the upstream would send with that prefill's next request."""
        return [(str(s), rid) for s in self.prefillers for rid in sorted(s.aborted_requests)]


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
