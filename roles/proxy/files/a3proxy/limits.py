# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The honest limits of a listener: the body cap, the body read timeout, the open-request limit and the
header timeout of a connection (uvicorn has none: a client sending its headers a byte at a time would hold
a connection for ever)."""

import asyncio
import json


def content_length(headers):
    """The Content-Length of ASGI headers as an int, None without one; ValueError for a malformed one."""
    values = [v for k, v in headers if k.lower() == b"content-length"]
    if not values:
        return None
    lengths = set(v.strip() for v in values)
    if len(lengths) != 1:
        raise ValueError("more than one Content-Length")
    text = lengths.pop().decode("latin-1")
    if not (text.isascii() and text.isdigit()):  # "²" is a digit to isdigit(), not to int()
        raise ValueError("a malformed Content-Length")
    return int(text)


async def read_body(receive, max_bytes, timeout):
    """Read a request's body from an ASGI receive. Returns (body, None) or (None, why): "too_large" as soon as
    more than max_bytes came, "timeout" when the whole body did not come within timeout seconds, "disconnect"
    when the client left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    chunks, size = [], 0
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None, "timeout"
        try:
            message = await asyncio.wait_for(receive(), remaining)
        except asyncio.TimeoutError:
            return None, "timeout"
        if message["type"] == "http.disconnect":
            return None, "disconnect"
        if message["type"] != "http.request":
            continue
        data = message.get("body", b"")
        size += len(data)
        if size > max_bytes:
            return None, "too_large"
        chunks.append(data)
        if not message.get("more_body", False):
            return b"".join(chunks), None


class Admission(object):
    """The open-request limit of a listener: enter() is False once limit requests are open."""

    def __init__(self, limit):
        self.limit = int(limit)
        self.open = 0

    def enter(self):
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def leave(self):
        self.open = max(0, self.open - 1)


def timeout_response(message):
    """The raw HTTP answer written on a connection whose headers did not come in time (no request was parsed,
    so no ASGI app can answer): 408 with an OpenAI-style error body, and the connection closes."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "code": "request_timeout"}}).encode("utf-8")
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(body)) + body


def with_header_timeout(base, timeout, on_timeout=None):
    """A subclass of uvicorn's HTTP protocol class base (h11 or httptools) that closes a connection whose
    request headers do not all come within timeout seconds: from the connection's start, and from the end of
    each answer for the next request on a kept-alive connection. on_timeout(client) is called for each
    connection cut (client: uvicorn's (host, port) of the peer).

    A request has its headers once uvicorn made a new request cycle (self.cycle) for it: the timer armed for
    the cycle that was current then finds another cycle and does nothing."""
    response = timeout_response("the request headers did not come within %gs" % timeout)
    unset = object()

    class HeaderTimeoutProtocol(base):
        _a3_timer = None

        def connection_made(self, transport):
            super(HeaderTimeoutProtocol, self).connection_made(transport)
            self._a3_arm(getattr(self, "cycle", None))

        def on_response_complete(self):
            finished = getattr(self, "cycle", unset)
            super(HeaderTimeoutProtocol, self).on_response_complete()
            if not self.transport.is_closing():
                self._a3_arm(finished)

        def connection_lost(self, exc):
            self._a3_disarm()
            super(HeaderTimeoutProtocol, self).connection_lost(exc)

        def _a3_disarm(self):
            if self._a3_timer is not None:
                self._a3_timer.cancel()
                self._a3_timer = None

        def _a3_arm(self, cycle):
            self._a3_disarm()
            self._a3_timer = self.loop.call_later(timeout, self._a3_expire, cycle)

        def _a3_expire(self, cycle):
            self._a3_timer = None
            if getattr(self, "cycle", None) is not cycle or self.transport.is_closing():
                return
            if on_timeout is not None:
                try:
                    on_timeout(getattr(self, "client", None))
                except Exception:  # a counter must not keep the connection open
                    pass
            try:
                self.transport.write(response)
            finally:
                self.transport.close()

    HeaderTimeoutProtocol.__name__ = "HeaderTimeout" + base.__name__
    return HeaderTimeoutProtocol
