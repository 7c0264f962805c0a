# -*- coding: utf-8 -*-
"""a3proxy.limits: the body cap and read timeout, the open-request limit, the header timeout of a connection."""
from __future__ import annotations

import asyncio
import json

import pytest
from a3proxy import limits


@pytest.mark.parametrize("headers, want", [
    ([], None), ([(b"content-length", b"12")], 12), ([(b"Content-Length", b" 0 ")], 0),
    ([(b"content-length", b"5"), (b"content-length", b"5")], 5)])
def test_content_length(headers, want):
    assert limits.content_length(headers) == want


@pytest.mark.parametrize("headers", [[(b"content-length", b"-1")], [(b"content-length", b"1e3")],
                                     [(b"content-length", b"5"), (b"content-length", b"6")]])
def test_content_length_refuses(headers):
    with pytest.raises(ValueError):
        limits.content_length(headers)


def _receiver(parts, hang=False, disconnect=False):
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1 or hang or disconnect}
                for i, p in enumerate(parts)]
    if disconnect:
        messages.append({"type": "http.disconnect"})

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
    return receive


def read(parts, max_bytes=10, timeout=0.3, **kw):
    return asyncio.run(limits.read_body(_receiver(parts, **kw), max_bytes, timeout))


def test_read_body():
    assert read([b"12345", b"67890"]) == (b"1234567890", None)  # the limit itself is accepted
    assert read([b""]) == (b"", None)
    assert read([b"12345", b"678901"]) == (None, "too_large")
    assert read([b"x" * 11, b"never read"]) == (None, "too_large")
    assert read([b"123"], disconnect=True) == (None, "disconnect")


def test_read_body_times_out_for_the_whole_body():
    loop_time = []

    async def slow():
        async def receive():
            await asyncio.sleep(0.1)
            return {"type": "http.request", "body": b"x", "more_body": True}  # a byte now and then, never done
        start = asyncio.get_running_loop().time()
        result = await limits.read_body(receive, 1000, 0.35)
        loop_time.append(asyncio.get_running_loop().time() - start)
        return result

    assert asyncio.run(slow()) == (None, "timeout")
    assert 0.3 <= loop_time[0] < 0.6
    assert read([b"12"], hang=True) == (None, "timeout")


def test_admission():
    gate = limits.Admission(2)
    assert gate.enter() and gate.enter() and not gate.enter()
    assert gate.open == 2
    gate.leave()
    assert gate.enter() and gate.open == 2
    gate.leave(), gate.leave(), gate.leave()
    assert gate.open == 0


def test_timeout_response_is_a_408_that_closes():
    raw = limits.timeout_response("slow")
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head
    assert b"content-length: %d" % len(body) in head
    assert json.loads(body) == {"error": {"message": "slow", "type": "invalid_request_error",
                                          "code": "request_timeout"}}


class FakeTransport(object):
    def __init__(self):
        self.written, self.closed = [], False

    def write(self, data):
        self.written.append(data)

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed


class FakeProtocol(object):
    """What with_header_timeout needs of uvicorn's protocols: cycle (a new one per request whose headers came),
    transport, loop, client, connection_made/on_response_complete/connection_lost."""

    pipelined = False  # another request's headers are already buffered when an answer ends

    def __init__(self, loop):
        self.loop, self.cycle, self.client = loop, None, ("10.9.8.7", 5555)

    def connection_made(self, transport):
        self.transport = transport

    def headers_complete(self):
        self.cycle = object()

    def on_response_complete(self):
        if self.pipelined:
            self.cycle = object()  # uvicorn starts the next request at once

    def connection_lost(self, exc):
        pass


def test_the_header_timeout_closes_a_connection_without_complete_headers():
    cut = []

    async def run():
        cls = limits.with_header_timeout(FakeProtocol, 0.1, cut.append)
        slow, quick = (cls(asyncio.get_running_loop()) for _unused in range(2))
        for proto in (slow, quick):
            proto.connection_made(FakeTransport())
        await asyncio.sleep(0.05)
        quick.headers_complete()  # its request started in time
        await asyncio.sleep(0.1)
        assert slow.transport.closed and slow.transport.written[0].startswith(b"HTTP/1.1 408 ")
        assert not quick.transport.closed and not quick.transport.written
        # the next request on a kept-alive connection has its own timeout, from the end of the answer
        quick.on_response_complete()
        await asyncio.sleep(0.05)
        assert not quick.transport.closed
        await asyncio.sleep(0.1)
        assert quick.transport.closed
        # a connection that went away: its timer is gone
        idle = cls(asyncio.get_running_loop())
        idle.connection_made(FakeTransport())
        idle.connection_lost(None)
        await asyncio.sleep(0.15)
        assert not idle.transport.closed
    asyncio.run(run())
    assert cut == [("10.9.8.7", 5555)] * 2


def test_the_header_timeout_spares_a_pipelined_request():
    async def run():
        proto = limits.with_header_timeout(FakeProtocol, 0.1)(asyncio.get_running_loop())
        proto.pipelined = True
        proto.connection_made(FakeTransport())
        proto.headers_complete()
        proto.on_response_complete()
        await asyncio.sleep(0.15)
        assert not proto.transport.closed
    asyncio.run(run())
