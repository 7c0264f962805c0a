# -*- coding: utf-8 -*-
"""a3proxy.server in this process, with real uvicorn servers on 127.0.0.1 (port 0): the servers it makes (no
lifespan, no signal handlers of their own, the graceful shutdown), serve() starting the core before the
listeners and stopping it after, a connection without headers cut by the header timeout (the core counts it),
SIGTERM stopping both listeners (exit status 0, a second signal forces the exit) and a listener that ends by
itself (exit status 1)."""
from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest
from a3proxy import server
from a3proxy.answers import send_json

LOCAL = "127.0.0.1"


class Core(object):
    def __init__(self):
        self.events = []

    async def start(self):
        self.events.append("start")

    async def stop(self):
        self.events.append("stop")

    def header_timed_out(self, client):
        self.events.append(("header timeout", client[0]))


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send_json(send, 200, {"path": scope["path"]})


@pytest.fixture
def made(monkeypatch):
    """Every server serve() makes, through the real make_server."""
    servers = []
    real = server.make_server

    def recording(*args):
        servers.append(real(*args))
        return servers[-1]

    monkeypatch.setattr(server, "make_server", recording)
    return servers


def test_make_server():
    class Protocol(object):
        pass
    made = server.make_server(app, "127.0.0.2", 1234, Protocol)
    config = made.config
    assert (config.app, config.host, config.port, config.http, config.lifespan, config.timeout_graceful_shutdown) \
        == (app, "127.0.0.2", 1234, Protocol, "off", 5)
    assert made.install_signal_handlers() is None
    with made.capture_signals() as inside:
        assert inside is None
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


async def _started(servers, count):
    for _unused in range(200):
        if len(servers) == count and all(s.started for s in servers):
            return [s.servers[0].sockets[0].getsockname()[1] for s in servers]
        await asyncio.sleep(0.02)
    raise AssertionError("the listeners did not start")


async def _get(port, raw):
    reader, writer = await asyncio.open_connection(LOCAL, port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def test_serve_until_sigterm(made, caplog):
    core = Core()
    listeners = [(app, LOCAL, 0), (app, LOCAL, 0)]

    async def run():
        task = asyncio.ensure_future(server.serve(core, listeners, 0.2))
        ports = await _started(made, 2)
        assert core.events == ["start"]
        answer = await _get(ports[1], b"GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b'{"path": "/x"}')
        cut = await _get(ports[0], b"GET /slow HTTP/1.1\r\n")  # the headers never end
        assert cut.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b'"message": "the request headers did not come within 0.2s"' in cut
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
        os.kill(os.getpid(), signal.SIGTERM)
        for _unused in range(200):
            if made[0].should_exit:
                break
            await asyncio.sleep(0.01)
        assert [r.getMessage() for r in caplog.records if r.name == "a3_proxy"] == [
            "signal 15: stopping both listeners"]  # at the first signal
        assert [s.force_exit for s in made] == [False, False]
        os.kill(os.getpid(), signal.SIGTERM)
        return await asyncio.wait_for(task, 15)

    with caplog.at_level(logging.INFO, logger="a3_proxy"):
        assert asyncio.run(run()) == 0
    assert core.events == ["start", ("header timeout", LOCAL), "stop"]
    assert [s.config.port for s in made] == [0, 0]
    assert [s.should_exit for s in made] == [True, True] and [s.force_exit for s in made] == [True, True]
    assert [r.getMessage() for r in caplog.records if r.name == "a3_proxy"] == ["signal 15: stopping both listeners"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    protocol = made[0].config.http
    assert protocol.__name__ == "HeaderTimeout" + AutoHTTPProtocol.__name__ and issubclass(protocol, AutoHTTPProtocol)
    assert made[1].config.http is protocol


def test_a_listener_that_ends_by_itself(made):
    core = Core()

    async def run():
        task = asyncio.ensure_future(server.serve(core, [(app, LOCAL, 0), (app, LOCAL, 0)], 5))
        await _started(made, 2)
        made[0].should_exit = True
        return await asyncio.wait_for(task, 15)

    assert asyncio.run(run()) == 1
    assert core.events == ["start", "stop"] and [s.should_exit for s in made] == [True, True]
    assert [s.force_exit for s in made] == [False, False]


def test_serve_outside_the_main_thread(made):
    """No signal handler can be set outside the main thread: the listeners serve anyway."""
    import threading
    core = Core()
    result = []

    def thread():
        async def run():
            task = asyncio.ensure_future(server.serve(core, [(app, LOCAL, 0)], 5))
            await _started(made, 1)
            made[0].should_exit = True
            return await asyncio.wait_for(task, 15)
        result.append(asyncio.run(run()))

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join(30)
    assert result == [1] and core.events == ["start", "stop"]


class FakeServer(object):
    """A listener whose serve() fails at once (failing) or serves until told to exit, then takes a moment."""

    def __init__(self, core, failing):
        self.core, self.failing = core, failing
        self.should_exit = self.force_exit = False

    async def serve(self):
        if self.failing:
            raise RuntimeError("cannot serve")
        while not self.should_exit:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        self.core.events.append("served")


def test_a_listener_that_fails_stops_the_other_and_the_core(monkeypatch):
    core = Core()
    fakes = iter([True, False])
    monkeypatch.setattr(server, "make_server", lambda *args: FakeServer(core, next(fakes)))
    assert asyncio.run(server.serve(core, [(app, LOCAL, 0), (app, LOCAL, 0)], 5)) == 1
    assert core.events == ["start", "served", "stop"]  # the other listener ended before the core stopped


def test_the_loop_is_uvloops_when_the_image_has_it(monkeypatch):
    import sys
    import types
    made_loops = []

    def new_event_loop():
        loop = asyncio.new_event_loop()
        made_loops.append(loop)
        return loop

    monkeypatch.setitem(sys.modules, "uvloop", types.SimpleNamespace(new_event_loop=new_event_loop))
    assert server.loop_factory() is new_event_loop

    async def answer():
        return asyncio.get_running_loop()

    assert server.run(answer()) is made_loops[0] and made_loops[0].is_closed()


def test_the_loop_is_asyncios_without_uvloop(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert server.loop_factory() is asyncio.new_event_loop

    async def seven():
        return 7

    assert server.run(seven()) == 7
