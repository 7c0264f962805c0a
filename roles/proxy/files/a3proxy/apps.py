# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The two ASGI apps of the proxy, each on its own listener, both serving from one HonestProxy (core).

Public (the upstream's --host/--port): POST /v1/completions, POST /v1/chat/completions, GET /v1/models and
GET /healthcheck ({"status": "ok"}, or 503 with Retry-After naming the missing role, no address). Nothing else:
the upstream's /instances/*, its FastAPI docs (/docs, /openapi.json, /redoc), /a3/* and /metrics get 404 with an
OpenAI-style error, a known path with another method 405. With client keys (the secrets' api_keys) every path
but /healthcheck needs "Authorization: Bearer <key>", else 401.

Admin (--a3-admin-host, --a3-admin-port; the proxy host's loopback by default): GET /healthcheck (the full
body with every backend's address and state), GET /a3/backends, GET /metrics, POST /a3/drain, POST /a3/undrain
and the upstream's POST /instances/add and /instances/remove. With an admin token every path but /healthcheck
needs "Authorization: Bearer <token>", else 401.

Both: a body over --a3-max-body-bytes gets 413 before anything is forwarded (from Content-Length at once,
else while it is read), a body that does not come within --a3-body-timeout 408. The public listener answers 503
with Retry-After while --a3-max-inflight client requests are open.

asyncio and the standard library only: the apps are driven in the unit tests with a stand-in core.
"""

import logging

from . import COMPLETION_PATHS
from .answers import client_error, send_bytes, send_json
from .auth import bearer_token, token_matches, unauthorized_message
from .limits import content_length, read_body

log = logging.getLogger("a3_proxy")

PUBLIC_ROUTES = dict([(path, "POST") for path in COMPLETION_PATHS] + [("/v1/models", "GET"), ("/healthcheck", "GET")])
ADMIN_ROUTES = {"/healthcheck": "GET", "/a3/backends": "GET", "/metrics": "GET", "/a3/drain": "POST",
                "/a3/undrain": "POST", "/instances/add": "POST", "/instances/remove": "POST"}
CLOSE = [(b"connection", b"close")]
WWW_AUTHENTICATE = [(b"www-authenticate", b"Bearer")]


async def _lifespan(receive, send):
    """The listeners run without a lifespan (the core starts once for both); answer one if a server asks."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class Listener(object):
    """What both apps share: the ASGI entry, the 404/405/401 answers, reading a body within the limits."""

    routes = {}
    name = "listener"

    def __init__(self, core, options):
        self.core = core
        self.opt = options

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        if scope["type"] != "http":
            return None
        started = []

        async def tracked(message):
            if message["type"] == "http.response.start":
                started.append(message["status"])
            await send(message)

        try:
            return await self.handle(scope, receive, tracked)
        except Exception:
            log.exception("%s listener: %s %s failed", self.name, scope.get("method"), scope.get("path"))
            if not started:
                await send_json(send, 500, client_error(500, "the proxy failed to answer this request; see its log"))
            return None

    def endpoint(self, path):
        """The endpoint label of the request metrics (None: not counted per path)."""
        return None

    async def refuse(self, send, path, status, message, headers=()):
        endpoint = self.endpoint(path)
        if endpoint:
            self.core.count_request(endpoint, status)
        await send_json(send, status, client_error(status, message), headers)

    async def route(self, send, path, method):
        """True when path and method are served here; else answers 404 or 405 and returns False."""
        allowed = self.routes.get(path)
        if allowed is None:
            self.core.count("a3_proxy_not_found_total")
            await send_json(send, 404, client_error(404, "Invalid URL (%s %s)" % (method, path[:200])))
            return False
        if method != allowed:
            await self.refuse(send, path, 405, "Method %s is not allowed for %s (%s only)" % (method, path, allowed),
                              [(b"allow", allowed.encode())])
            return False
        return True

    async def unauthorized(self, send, path, what):
        self.core.count("a3_proxy_unauthorized_total")
        await self.refuse(send, path, 401, unauthorized_message(what), WWW_AUTHENTICATE)

    async def read(self, scope, receive, send):
        """The request's body within the limits, or None once 400/413/408 was answered (or the client left)."""
        path = scope.get("path", "")
        limit = self.opt.a3_max_body_bytes
        try:
            length = content_length(scope.get("headers", []))
        except ValueError as exc:
            await self.refuse(send, path, 400, "%s in the request" % exc, CLOSE)
            return None
        if length is not None and length > limit:
            self.core.count("a3_proxy_body_too_large_total")
            await self.refuse(send, path, 413, "the request body has %d bytes, more than the %d this proxy accepts"
                              % (length, limit), CLOSE)
            return None
        body, why = await read_body(receive, limit, self.opt.a3_body_timeout)
        if why == "too_large":
            self.core.count("a3_proxy_body_too_large_total")
            await self.refuse(send, path, 413, "the request body is longer than the %d bytes this proxy accepts"
                              % limit, CLOSE)
            return None
        if why == "timeout":
            self.core.count("a3_proxy_body_timeouts_total")
            await self.refuse(send, path, 408, "the request body did not come within %gs" % self.opt.a3_body_timeout,
                              CLOSE)
            return None
        if why == "disconnect":
            endpoint = self.endpoint(path)
            if endpoint:
                self.core.count_request(endpoint, 499)
            return None
        return body

    async def handle(self, scope, receive, send):
        raise NotImplementedError


class PublicApp(Listener):
    """The public listener: completions, the model list and the short /healthcheck."""

    routes = PUBLIC_ROUTES
    name = "public"

    def __init__(self, core, options, api_keys=()):
        Listener.__init__(self, core, options)
        self.api_keys = tuple(api_keys)

    def endpoint(self, path):
        return path if path in COMPLETION_PATHS or path == "/v1/models" else None

    async def handle(self, scope, receive, send):
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path == "/healthcheck" and method == "GET":
            status, body = self.core.public_health()
            return await send_json(send, status, body, self.core.retry_after if status == 503 else ())
        if self.api_keys and path != "/healthcheck":
            if not token_matches(bearer_token(scope.get("headers", [])), self.api_keys):
                return await self.unauthorized(send, path, "API key")
        if not await self.route(send, path, method):
            return None
        admission = self.core.admission
        if not admission.enter():
            self.core.count("a3_proxy_busy_total")
            return await self.refuse(send, path, 503, "the proxy has %d requests open, its limit; retry later"
                                     % admission.limit, self.core.retry_after)
        try:
            if path == "/v1/models":
                return await self.core.models(send)
            body = await self.read(scope, receive, send)
            if body is None:
                return None
            return await self.core.completion(scope, body, receive, send)
        finally:
            admission.leave()


class AdminApp(Listener):
    """The admin listener: the full /healthcheck, the backends, the metrics, drain and the upstream's
    /instances/*."""

    routes = ADMIN_ROUTES
    name = "admin"

    def __init__(self, core, options, admin_token=""):
        Listener.__init__(self, core, options)
        self.admin_token = admin_token

    async def handle(self, scope, receive, send):
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path == "/healthcheck" and method == "GET":
            status, body = self.core.full_health()
            return await send_json(send, status, body, self.core.retry_after if status == 503 else ())
        if self.admin_token and path != "/healthcheck":
            if not token_matches(bearer_token(scope.get("headers", [])), [self.admin_token]):
                return await self.unauthorized(send, path, "admin token")
        if not await self.route(send, path, method):
            return None
        if path == "/a3/backends":
            return await send_json(send, 200, self.core.backends_answer())
        if path == "/metrics":
            return await send_bytes(send, 200, self.core.metrics_text().encode("utf-8"),
                                    b"text/plain; version=0.0.4; charset=utf-8")
        body = await self.read(scope, receive, send)
        if body is None:
            return None
        if path in ("/a3/drain", "/a3/undrain"):
            return await self.core.drain(path, body, send)
        return await self.core.instances(scope, body, receive, send)
