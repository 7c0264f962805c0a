# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""Two uvicorn servers, the public and the admin listener, on one event loop, around one core.

Neither server runs a lifespan (the core starts the upstream's once, before both listen) nor installs signal
handlers (each would take SIGTERM from the other): the loop's handler stops both. Both use uvicorn's own HTTP
protocol (httptools or h11, as uvicorn picks) with the header timeout of limits.with_header_timeout. The loop is
uvloop's when the image has it (a vLLM image does: uvicorn[standard]), asyncio's otherwise (run).
"""

import asyncio
import contextlib
import logging
import signal

from .limits import with_header_timeout

log = logging.getLogger("a3_proxy")


def loop_factory():
    """The factory of the event loop the proxy runs on: uvloop's when importable, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(coro):
    """Run coro to its end on the loop of loop_factory and return its result."""
    factory = loop_factory()
    if not hasattr(asyncio, "Runner"):  # Python before 3.11
        loop = factory()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


def make_server(app, host, port, protocol):
    import uvicorn

    class Server(uvicorn.Server):
        def install_signal_handlers(self):  # uvicorn before 0.29
            pass

        @contextlib.contextmanager
        def capture_signals(self):  # uvicorn 0.29 and later
            yield

    return Server(uvicorn.Config(app, host=host, port=port, http=protocol, lifespan="off",
                                 timeout_graceful_shutdown=5))


async def serve(core, listeners, header_timeout):
    """Start the core, serve every (app, host, port) of listeners until SIGTERM or SIGINT, stop the core.
    Returns the exit status: 1 when a listener ended by itself, or when the core's fatal future (a core with a
    child process it cannot do without has one: router.RouterCore) became done."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    protocol = with_header_timeout(AutoHTTPProtocol, header_timeout, core.header_timed_out)
    servers = [make_server(app, host, port, protocol) for app, host, port in listeners]
    stopping = []
    loop = asyncio.get_running_loop()

    def stop(signum):
        if not stopping:
            log.info("signal %d: stopping both listeners", signum)
        stopping.append(signum)
        for server in servers:
            if server.should_exit:
                server.force_exit = True
            server.should_exit = True

    await core.start()
    fatal = getattr(core, "fatal", None)
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop, signum)
            handled.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    try:
        tasks = [asyncio.ensure_future(server.serve()) for server in servers]
        await asyncio.wait(tasks + ([fatal] if fatal is not None else []), return_when=asyncio.FIRST_COMPLETED)
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        await core.stop()
    if fatal is not None and fatal.done():
        return 1
    return 0 if stopping else 1
