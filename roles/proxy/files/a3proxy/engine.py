# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The upstream script as the proxy's engine: importing it by path, its argument parsing, the httpx hooks on
its backend clients, and one client request run through its ASGI app.

The hooks go on every ServerState the upstream makes (its __init__ is wrapped before its lifespan runs, so the
servers of the command line, of /instances/add and of the prober's add are all covered):
* request: the Authorization header is ours. The upstream writes "Bearer $OPENAI_API_KEY" itself, the literal
  "Bearer None" when that is unset; the hook sets "Bearer <backend_api_key>" when the secrets give one and
  removes the header otherwise. The upstream never forwards the client's headers; the hook makes sure no
  Authorization but the backend key ever reaches an engine. The backend contacted is noted in the request's
  trace (which backend a failure waited on), with the X-Request-Id the upstream sent it.
* response: a backend's 4xx answer to a completion is the client's answer (a bad request stays bad however
  often it is sent). The upstream retries it like a connection error (its loops catch httpx's errors and
  Exception), so the hook raises BackendAnswer, a BaseException: it passes every one of those loops and the
  upstream's and starlette's handlers, ends the upstream request, and the wrapper answers the client with the
  backend's status and body. The backend is not marked as failing for it.
"""

import asyncio
import contextvars
import importlib.util
import sys

from . import UPSTREAM_MODULE
from .answers import error_text, is_json_error, json_or_none, snippet
from .health import backend_key
from .rotation import LoadLedger

# Largest part of a backend's 4xx body that is read and passed on.
BACKEND_ERROR_CAP = 64 * 1024

# The state of the client request the current task serves (None outside one). The upstream runs each request
# in tasks that copy our context, so its hooks and its selection see the request's own RequestState.
_REQUEST = contextvars.ContextVar("a3_proxy_request", default=None)


class RequestState(object):
    """One client request as the engine serves it: the backends contacted in order (trace, entries
    {"backend": "h:p", "status": int or None}), the request ids the upstream sent to each backend, and the
    ledger of the load it booked."""

    def __init__(self):
        self.trace = []
        self.request_ids = {}
        self.ledger = LoadLedger()

    def activate(self):
        """Make this the current request of the calling task (and of every task it creates from now on)."""
        _REQUEST.set(self)


def current_request():
    return _REQUEST.get()


class BackendAnswer(BaseException):
    """A backend's 4xx answer to a completion, carried past the upstream's retry loops (see the module's text)."""

    def __init__(self, status, body, content_type, backend):
        BaseException.__init__(self, "backend %s answered HTTP %d" % (backend, status))
        self.status, self.body, self.content_type, self.backend = status, body, content_type, backend


def find_exception(exc, cls):
    """The first exception of class cls in exc, the exception groups it holds and its causes, or None."""
    seen, todo = set(), [exc]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, cls):
            return item
        todo.extend(getattr(item, "exceptions", None) or ())
        todo.extend([item.__cause__, item.__context__])
    return None


def url_key(url):
    return backend_key(url.host, url.port or (443 if url.scheme == "https" else 80))


def make_hooks(backend_api_key):
    """The (request hook, response hook) of the upstream's backend clients."""
    authorization = ("Bearer " + backend_api_key) if backend_api_key else None

    async def on_request(request):
        if authorization:
            request.headers["Authorization"] = authorization
        else:
            request.headers.pop("Authorization", None)
        state = _REQUEST.get()
        if state is not None:
            key = url_key(request.url)
            state.trace.append({"backend": key, "status": None})
            rid = request.headers.get("x-request-id")
            if rid:
                state.request_ids.setdefault(key, set()).add(rid)

    async def on_response(response):
        state = _REQUEST.get()
        if state is None:
            return
        key = url_key(response.request.url)
        for entry in reversed(state.trace):
            if entry["backend"] == key and entry["status"] is None:
                entry["status"] = response.status_code
                break
        if 400 <= response.status_code < 500 and response.request.url.path.endswith("/completions"):
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= BACKEND_ERROR_CAP:
                    break
            raise BackendAnswer(response.status_code, b"".join(chunks)[:BACKEND_ERROR_CAP],
                                response.headers.get("content-type", "application/json"), key)

    return on_request, on_response


def hook_client(client, hooks):
    """Add the hooks to an httpx client of the upstream (once)."""
    if getattr(client, "_a3_hooked", False):
        return
    event_hooks = client.event_hooks
    event_hooks.setdefault("request", []).append(hooks[0])
    event_hooks.setdefault("response", []).append(hooks[1])
    client.event_hooks = event_hooks
    client._a3_hooked = True


# Connection pools per backend. httpcore's pool walks every connection it holds at each request's start and end (and
# each idle one again for every idle one), which made it the largest cost of the proxy at 256 clients; the
# connections of one backend spread over this many pools make each walk that many times shorter.
POOL_SHARDS = 8


def sharded_client(client, shards=POOL_SHARDS, make_transport=None):
    """A client like the upstream's httpx.AsyncClient (its base URL and timeout; the upstream sets no other option
    but unbounded limits) whose requests take turns among `shards` transports, each with its own connection pool
    (make_transport() makes one; default an httpx.AsyncHTTPTransport without limits). Anything that is not an
    httpx.AsyncClient is returned as it is."""
    import httpx
    if not isinstance(client, httpx.AsyncClient):
        return client

    class ShardedTransport(httpx.AsyncBaseTransport):
        def __init__(self, transports):
            self.transports, self.turn = transports, 0

        async def handle_async_request(self, request):
            transport = self.transports[self.turn]
            self.turn = (self.turn + 1) % len(self.transports)
            return await transport.handle_async_request(request)

        async def aclose(self):
            for transport in self.transports:
                await transport.aclose()

    if make_transport is None:
        def make_transport():
            return httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))
    return httpx.AsyncClient(base_url=client.base_url, timeout=client.timeout,
                             transport=ShardedTransport([make_transport() for _shard in range(shards)]))


def install_hooks(module, backend_api_key):
    """Wrap the upstream's ServerState.__init__ so every server it makes has a sharded client (sharded_client) that
    carries the hooks."""
    hooks = make_hooks(backend_api_key)
    cls = module.ServerState
    original = getattr(cls.__init__, "_a3_original", cls.__init__)

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.client = sharded_client(self.client)
        hook_client(self.client, hooks)

    __init__._a3_original = original
    cls.__init__ = __init__
    return hooks


def load_upstream(path):
    """Import the upstream proxy script by path (it builds its FastAPI app at import time)."""
    spec = importlib.util.spec_from_file_location(UPSTREAM_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[UPSTREAM_MODULE] = module
    spec.loader.exec_module(module)
    missing = [name for name in ("parse_args", "app", "ProxyState", "ServerState") if not hasattr(module, name)]
    if missing:
        raise ImportError("%s lacks %s: not the vllm-ascend v0.18.0 proxy example" % (path, ", ".join(missing)))
    return module


def upstream_args(module, rest, prog):
    """Let the upstream script parse its own arguments (it reads sys.argv)."""
    saved = sys.argv
    sys.argv = [prog] + list(rest)
    try:
        return module.parse_args()
    finally:
        sys.argv = saved


def status_error_answer(exc):
    """(status, body) of a backend's answer carried by an httpx.HTTPStatusError or a BackendAnswer, else None."""
    if isinstance(exc, BackendAnswer):
        return exc.status, exc.body
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    try:
        return status, bytes(response.content)
    except Exception:  # a streamed response that was never read
        return status, b""


def exc_text(exc, where=True):
    """A one-line account of an exception the upstream raised; with where, naming the backend URL when httpx
    knows it (for the logs; a client's text goes without)."""
    request = getattr(exc, "_request", None)  # httpx errors keep their request here
    url = getattr(request, "url", None)
    place = " %s %s" % (getattr(request, "method", ""), url) if (url is not None and where) else ""
    carried = status_error_answer(exc)
    if carried:
        status, body = carried
        detail = error_text(json_or_none(body)) if is_json_error(body) else snippet(body, 200)
        return "backend%s answered HTTP %d%s" % (place, status, (": " + detail) if detail else "")
    first_line = ((str(exc) or repr(exc)).strip().splitlines() or [type(exc).__name__])[0]
    return "%s: %s%s" % (type(exc).__name__, first_line, (" (%s)" % place.strip()) if place else "")


def forward_scope(scope, body):
    """The scope of a request as the upstream app gets it: without the client's Authorization (nothing of the
    client's credentials goes further) and with the Content-Length of the body it is given. ASGI 2.3 is asked
    for, so starlette watches receive() for a disconnect while it streams and an abort also stops a stream
    that waits on a hung backend."""
    scope = dict(scope)
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in (b"authorization", b"content-length")]
    scope["headers"] = headers + [(b"content-length", str(len(body)).encode())]
    scope["asgi"] = dict(scope.get("asgi") or {}, spec_version="2.3")
    return scope


class Upstream(object):
    """One request forwarded to the upstream ASGI app, its messages collected through a queue.

    The upstream learns that the request is over (timeout, client gone, our decision) the way it learns
    of a client disconnect: receive() returns http.disconnect, and send() raises OSError. The caller
    activates the request's RequestState first: the task made here copies that context.
    """

    def __init__(self, app, scope, body, receive):
        self.queue = asyncio.Queue(maxsize=64)
        self.abort = asyncio.Event()
        self.client_gone = False
        self._body_given = False
        self._receive = receive
        self._body = body
        self.task = asyncio.ensure_future(self._run(app, forward_scope(scope, body)))

    async def _run(self, app, scope):
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the upstream re-raises after its 500 answer: keep the cause
            await self._put(("exc", exc))
            return
        await self._put(("end", None))

    async def _put(self, item):
        if self.abort.is_set():
            return
        await self.queue.put(item)

    async def receive(self):
        if not self._body_given:
            self._body_given = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        if self.abort.is_set():
            return {"type": "http.disconnect"}
        real = asyncio.ensure_future(self._receive())
        aborted = asyncio.ensure_future(self.abort.wait())
        try:
            done, _unused = await asyncio.wait({real, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (real, aborted):
                if not fut.done():
                    fut.cancel()
        if real in done:
            message = real.result()
            if message.get("type") == "http.disconnect":
                self.client_gone = True
            return message
        return {"type": "http.disconnect"}

    async def send(self, message):
        if self.abort.is_set():
            raise OSError("a3_proxy: the request is over")
        await self.queue.put(("msg", message))

    async def get(self, timeout=None):
        """The next message of the upstream; asyncio.TimeoutError after timeout seconds without one. A message
        already queued is taken at once (no timer: a stream's chunks mostly arrive faster than they are sent)."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        if timeout is None:
            return await self.queue.get()
        return await asyncio.wait_for(self.queue.get(), timeout)

    async def close(self, grace=3.0):
        """End the upstream request: signal a disconnect, let it unwind, cancel it if it does not. True when
        the upstream's task is over afterwards."""
        self.abort.set()
        while not self.queue.empty():
            self.queue.get_nowait()
        if self.task.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self.task), grace)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
            pass
        except BaseException:  # a BackendAnswer the task re-raised: it is over
            pass
        if not self.task.done():
            self.task.cancel()
            try:
                await asyncio.wait_for(self.task, 1.0)
            except BaseException:
                pass
        return self.task.done()
