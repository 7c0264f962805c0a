# -*- coding: utf-8 -*-
"""a3proxy.limits, pinned whole: the Content-Length rules and their messages, reading a body (its end, its cap, its
deadline), the open-request gate, the raw 408 and the header timeout of a connection driven on a fake clock (the
timers it sets are fired by hand)."""
from __future__ import annotations

import asyncio
import json

import pytest
from a3proxy import limits


@pytest.mark.parametrize("headers, want", [
    ([(b"CONTENT-LENGTH", b"7")], 7),
    ([(b"content-length", b"5"), (b"x", b"1"), (b"content-length", b" 5 ")], 5),
    ([(b"content-length", b"007")], 7),
    ([(b"content-type", b"9")], None),
])
def test_content_length(headers, want):
    assert limits.content_length(headers) == want


@pytest.mark.parametrize("headers, message", [
    ([(b"content-length", b"5"), (b"content-length", b"50")], "more than one Content-Length"),
    ([(b"content-length", b"+5")], "a malformed Content-Length"),
    ([(b"content-length", b"")], "a malformed Content-Length"),
    ([(b"content-length", b"\xb2")], "a malformed Content-Length"),   # latin-1 superscript two, not a digit
])
def test_content_length_refuses(headers, message):
    with pytest.raises(ValueError) as err:
        limits.content_length(headers)
    assert str(err.value) == message


def _run_read(given, max_bytes=10, timeout=5.0):
    calls, messages = [], list(given)

    def receive():  # an already answered awaitable: no time passes
        calls.append(1)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(messages.pop(0))
        return fut

    async def run():
        return await limits.read_body(receive, max_bytes, timeout)

    return asyncio.run(run()), len(calls)


@pytest.mark.parametrize("messages, want", [
    ([{"type": "http.request"}], (b"", None)),                                     # no body, no more_body
    ([{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"cd"}],
     (b"abcd", None)),
    ([{"type": "lifespan.startup"}, {"type": "http.request", "body": b"x"}], (b"x", None)),  # other types skipped
    ([{"type": "http.request", "more_body": True}, {"type": "http.disconnect"}], (None, "disconnect")),
    ([{"type": "http.request", "body": b"x" * 10, "more_body": True}, {"type": "http.request", "body": b"y"}],
     (None, "too_large")),
])
def test_read_body(messages, want):
    assert _run_read(messages)[0] == want


def test_read_body_with_no_time_left_does_not_read():
    assert _run_read([{"type": "http.request", "body": b"x"}], timeout=0) == ((None, "timeout"), 0)
    assert _run_read([{"type": "http.request", "body": b"x"}], timeout=0.5) == ((b"x", None), 1)


def test_admission():
    gate = limits.Admission("1")
    assert gate.limit == 1 and gate.open == 0
    assert gate.enter() is True and gate.enter() is False and gate.open == 1
    gate.leave()
    gate.leave()
    assert gate.open == 0 and gate.enter() is True


def test_timeout_response():
    body = (b'{"error": {"message": "slow \\u00e9", "type": "invalid_request_error", "code": "request_timeout"}}')
    assert limits.timeout_response("slow \xe9") == (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n" % len(body)) + body
    assert json.loads(body)["error"]["message"] == "slow \xe9"


class Handle(object):
    def __init__(self, delay, callback, args):
        self.delay, self.callback, self.args, self.cancelled = delay, callback, args, False

    def cancel(self):
        self.cancelled = True

    def fire(self):
        self.callback(*self.args)


class FakeLoop(object):
    def __init__(self):
        self.timers = []

    def call_later(self, delay, callback, *args):
        self.timers.append(Handle(delay, callback, args))
        return self.timers[-1]


class Transport(object):
    def __init__(self):
        self.written, self.closed = [], False

    def write(self, data):
        self.written.append(data)

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed


class Base(object):
    """uvicorn's protocol as far as with_header_timeout uses it: cycle, transport, loop, client."""

    def __init__(self):
        self.loop, self.cycle, self.client, self.events = FakeLoop(), None, ("10.1.2.3", 4567), []
        self.next_cycle = None

    def connection_made(self, transport):
        self.transport = transport
        self.events.append("made")

    def on_response_complete(self):
        self.events.append("complete")
        self.cycle = self.next_cycle

    def connection_lost(self, exc):
        self.events.append(("lost", exc))


def make(timeout=1.5, on_timeout=None, base=Base):
    proto = limits.with_header_timeout(base, timeout, on_timeout)()
    proto.connection_made(Transport())
    return proto


CUT = limits.timeout_response("the request headers did not come within 1.5s")


def test_the_protocol_class():
    cls = limits.with_header_timeout(Base, 2)
    assert cls.__name__ == "HeaderTimeoutBase" and issubclass(cls, Base) and cls._a3_timer is None


def test_a_connection_without_headers_in_time_is_cut():
    cut = []
    proto = make(on_timeout=cut.append)
    [timer] = proto.loop.timers
    assert (timer.delay, timer.args, proto.events, proto._a3_timer) == (1.5, (None,), ["made"], timer)
    timer.fire()
    assert proto.transport.written == [CUT] and proto.transport.closed and cut == [("10.1.2.3", 4567)]
    assert proto._a3_timer is None


def test_a_failing_counter_does_not_keep_the_connection():
    def boom(client):
        raise RuntimeError("counter")
    proto = make(on_timeout=boom)
    proto.loop.timers[0].fire()
    assert proto.transport.written == [CUT] and proto.transport.closed
    proto = make()  # no counter
    proto.loop.timers[0].fire()
    assert proto.transport.written == [CUT] and proto.transport.closed


def test_the_timer_spares_a_request_that_started_and_a_closing_connection():
    cut = []
    proto = make(on_timeout=cut.append)
    proto.cycle = object()  # the headers came
    proto.loop.timers[0].fire()
    assert proto.transport.written == [] and not proto.transport.closed and proto._a3_timer is None
    proto = make(on_timeout=cut.append)
    proto.transport.closed = True
    proto.loop.timers[0].fire()
    assert proto.transport.written == [] and cut == []


def test_the_next_request_gets_its_own_timer_from_the_end_of_the_answer():
    cut = []
    proto = make(on_timeout=cut.append)
    first = proto.loop.timers[0]
    proto.cycle = proto.next_cycle = "cycle-1"
    proto.on_response_complete()
    assert proto.events == ["made", "complete"] and first.cancelled
    second = proto.loop.timers[1]
    assert (second.delay, second.args, proto._a3_timer) == (1.5, ("cycle-1",), second)
    second.fire()
    assert proto.transport.written == [CUT] and cut == [("10.1.2.3", 4567)]


def test_a_pipelined_request_and_a_closed_connection_get_no_new_cut():
    proto = make()
    proto.cycle, proto.next_cycle = "cycle-1", "cycle-2"  # the next request started with the answer's end
    proto.on_response_complete()
    proto.loop.timers[1].fire()
    assert proto.transport.written == [] and not proto.transport.closed
    proto = make()
    proto.transport.closed = True
    proto.on_response_complete()
    assert len(proto.loop.timers) == 1 and not proto.loop.timers[0].cancelled


def test_a_lost_connection_drops_its_timer():
    proto = make()
    proto.connection_lost(None)
    assert proto.loop.timers[0].cancelled and proto._a3_timer is None and proto.events == ["made", ("lost", None)]
    proto.connection_lost(None)  # twice: nothing to cancel
    assert proto.events[-1] == ("lost", None)


class NoCycle(Base):
    """A protocol that has no request cycle attribute at all."""

    def __init__(self):
        Base.__init__(self)
        del self.cycle

    def on_response_complete(self):
        self.events.append("complete")


def test_a_protocol_without_a_cycle():
    proto = make(base=NoCycle)
    assert proto.loop.timers[0].args == (None,)
    proto.on_response_complete()
    proto.loop.timers[1].fire()  # armed for "no cycle known", which is not "no cycle": it does nothing
    assert proto.transport.written == []
    proto.loop.timers[0].fire()
    assert proto.transport.written == [CUT]


def test_read_body_at_exactly_no_time_left_does_not_read():
    """On a clock that does not move, a timeout of 0 leaves exactly 0 s: that is no time, nothing is read."""
    calls = []

    def receive():
        calls.append(1)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result({"type": "http.request", "body": b"x"})
        return fut

    async def run():
        loop = asyncio.get_running_loop()
        loop.time = lambda: 100.0
        try:
            return await limits.read_body(receive, 10, 0)
        finally:
            del loop.time

    assert asyncio.run(run()) == (None, "timeout") and calls == []
