# -*- coding: utf-8 -*-
"""a3proxy.engine, pinned whole: the trace and the request ids the hooks note, which backend answers escape as a
BackendAnswer and how much of their body is read, the hooks on the upstream's clients, importing and running the
upstream script's parser, the one-line accounts of failures, the forwarded scope, and one request through
Upstream (its receive, send, get and close)."""
from __future__ import annotations

import asyncio
import contextvars
import sys
import types

import pytest
from a3proxy import engine

from test_proxy_engine import Headers, request


def in_request(coro_fn):
    def run():
        state = engine.RequestState()
        state.activate()
        return state, asyncio.run(coro_fn(state))
    return contextvars.copy_context().run(run)


def test_a_request_state():
    state = engine.RequestState()
    assert (state.trace, state.request_ids) == ([], {}) and type(state.ledger).__name__ == "LoadLedger"
    assert contextvars.copy_context().run(lambda: (state.activate(), engine.current_request())[1]) is state
    assert engine.current_request() is None


def test_backend_answer():
    answer = engine.BackendAnswer(422, b"{}", "text/plain", "h:1")
    assert str(answer) == "backend h:1 answered HTTP 422" and answer.args == ("backend h:1 answered HTTP 422",)
    assert (answer.status, answer.body, answer.content_type, answer.backend) == (422, b"{}", "text/plain", "h:1")
    assert engine.BACKEND_ERROR_CAP == 65536


@pytest.mark.parametrize("scheme, port, want", [("http", None, "h:80"), ("https", None, "h:443"),
                                                ("https", 8443, "h:8443"), ("http", 0, "h:80")])
def test_url_key(scheme, port, want):
    assert engine.url_key(types.SimpleNamespace(host="h", port=port, scheme=scheme)) == want


def test_the_request_hook_notes_each_backend_and_its_request_ids():
    on_request, _unused = engine.make_hooks("bk")

    async def flow(state):
        await on_request(request(host="p", port=1, headers={"X-Request-Id": "r1"}))
        await on_request(request(host="p", port=1, headers={"X-Request-Id": "r2"}))
        await on_request(request(host="d", port=2))  # no request id
        await on_request(request(host="d", port=2, headers={"X-Request-Id": ""}))

    state, _unused = in_request(flow)
    assert state.trace == [{"backend": "p:1", "status": None}, {"backend": "p:1", "status": None},
                           {"backend": "d:2", "status": None}, {"backend": "d:2", "status": None}]
    assert state.request_ids == {"p:1": {"r1", "r2"}}


def _response(status, body=b"", req=None, headers=None, chunk=7, consumed=None):
    async def aiter_bytes():
        for i in range(0, len(body), chunk):
            if consumed is not None:
                consumed.append(i)
            yield body[i:i + chunk]
    return types.SimpleNamespace(status_code=status, request=req or request(), aiter_bytes=aiter_bytes,
                                 headers={"content-type": "application/json"} if headers is None else headers)


def test_the_response_hook_sets_the_status_of_the_last_open_entry_of_that_backend():
    _unused, on_response = engine.make_hooks("")

    async def flow(state):
        state.trace.extend([{"backend": "d:2", "status": None}, {"backend": "d:2", "status": None},
                            {"backend": "p:1", "status": None}])
        await on_response(_response(200, req=request(host="d", port=2)))
        await on_response(_response(204, req=request(host="d", port=2)))
        await on_response(_response(200, req=request(host="x", port=9)))  # never traced: nothing changes

    state, _unused = in_request(flow)
    assert state.trace == [{"backend": "d:2", "status": 204}, {"backend": "d:2", "status": 200},
                           {"backend": "p:1", "status": None}]


@pytest.mark.parametrize("status, path, escapes", [
    (399, "/v1/completions", False), (400, "/v1/completions", True), (499, "/v1/chat/completions", True),
    (500, "/v1/completions", False), (404, "/v1/models", False), (404, "/completions", True),
    (404, "/v1/completions/x", False)])
def test_which_answers_escape(status, path, escapes):
    _unused, on_response = engine.make_hooks("")

    async def flow(state):
        try:
            await on_response(_response(status, b"no", req=request(path=path)))
        except engine.BackendAnswer as exc:
            return exc
        return None

    state, answer = in_request(flow)
    assert (answer is not None) is escapes
    assert state.trace == []
    if escapes:
        assert (answer.status, answer.body, answer.content_type, answer.backend) == (
            status, b"no", "application/json", "10.0.0.2:2")


def test_a_4xx_body_is_read_up_to_the_cap_only(monkeypatch):
    monkeypatch.setattr(engine, "BACKEND_ERROR_CAP", 21)
    _unused, on_response = engine.make_hooks("")
    consumed = []

    async def flow(state):
        with pytest.raises(engine.BackendAnswer) as err:
            await on_response(_response(400, bytes(range(100)), headers={}, consumed=consumed))
        return err.value

    _unused, answer = in_request(flow)
    assert answer.body == bytes(range(21)) and consumed == [0, 7, 14]  # 21 bytes came: no fourth chunk is read
    assert answer.content_type == "application/json"  # the default without a content-type


def test_hook_client_keeps_the_clients_own_hooks():
    def mine(_unused):
        return None
    client = types.SimpleNamespace(event_hooks={"request": [mine]})
    hooks = ("req", "resp")
    engine.hook_client(client, hooks)
    engine.hook_client(client, hooks)
    assert client.event_hooks == {"request": [mine, "req"], "response": ["resp"]} and client._a3_hooked is True


def test_install_hooks_wraps_the_original_init_once():
    class Server(object):
        made = []

        def __init__(self, host, port, extra=None):
            self.host, self.port, self.extra = host, port, extra
            self.client = types.SimpleNamespace(event_hooks={})
            Server.made.append(host)

    module = types.SimpleNamespace(ServerState=Server)
    original = Server.__init__
    first = engine.install_hooks(module, "k1")
    second = engine.install_hooks(module, "")
    assert Server.__init__._a3_original is original
    server = Server("h", 1, extra="e")
    assert (server.host, server.port, server.extra, Server.made) == ("h", 1, "e", ["h"])
    assert server.client.event_hooks == {"request": [second[0]], "response": [second[1]]}
    assert first[0] is not second[0]
    req = request(headers={"Authorization": "Bearer None"})
    asyncio.run(server.client.event_hooks["request"][0](req))
    assert req.headers == Headers()  # the second install (no backend key) is the one in force


MODULE = """
def parse_args():
    import sys
    CALLS.append(list(sys.argv))
    if "--bad" in sys.argv:
        raise ValueError("bad count")
    return "parsed"
CALLS = []
app = object()
class ProxyState: pass
class ServerState: pass
"""


def test_load_upstream_and_its_arguments(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "load_balance_proxy_server_example", raising=False)
    script = tmp_path / "up.py"
    script.write_text(MODULE, encoding="utf-8")
    module = engine.load_upstream(str(script))
    assert sys.modules["load_balance_proxy_server_example"] is module and module.__name__ == \
        "load_balance_proxy_server_example"
    argv = list(sys.argv)
    assert engine.upstream_args(module, ("--port", "1"), "a3.py") == "parsed"
    with pytest.raises(ValueError):
        engine.upstream_args(module, ["--bad"], "a3.py")
    assert module.CALLS == [["a3.py", "--port", "1"], ["a3.py", "--bad"]] and sys.argv == argv


def test_load_upstream_refuses_another_script(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "load_balance_proxy_server_example", raising=False)
    script = tmp_path / "other.py"
    script.write_text("app = 1\nclass ServerState: pass\n", encoding="utf-8")
    with pytest.raises(ImportError) as err:
        engine.load_upstream(str(script))
    assert str(err.value) == ("%s lacks parse_args, ProxyState: not the vllm-ascend v0.18.0 proxy example" % script)
    with pytest.raises(ImportError) as err:
        engine.load_upstream(str(tmp_path / "script.txt"))
    assert str(err.value) == "cannot load %s" % (tmp_path / "script.txt")


class Response(object):
    def __init__(self, status, content=None):
        self.status_code = status
        self._content = content

    @property
    def content(self):
        if self._content is None:
            raise RuntimeError("not read")
        return self._content


def _status_error(status, content=None, req=None):
    exc = Exception("Server error '%s'" % status)
    exc.response = Response(status, content)
    if req is not None:
        exc._request = req
    return exc


@pytest.mark.parametrize("exc, want", [
    (_status_error(503, bytearray(b"busy")), (503, b"busy")),
    (_status_error(502), (502, b"")),
    (_status_error("503"), None),
    (types.SimpleNamespace(response=None), None),
])
def test_status_error_answer(exc, want):
    assert engine.status_error_answer(exc) == want


POST = types.SimpleNamespace(method="POST", url="http://h:1/v1/completions")


@pytest.mark.parametrize("exc, where, want", [
    (_status_error(500, b'{"error": {"message": "oom"}}', POST), True,
     "backend POST http://h:1/v1/completions answered HTTP 500: oom"),
    (_status_error(500, b'{"error": {"message": "oom"}}', POST), False, "backend answered HTTP 500: oom"),
    (_status_error(502, b"plain " + b"x" * 300), True, "backend answered HTTP 502: plain " + "x" * 194 + "..."),
    (_status_error(502, b""), True, "backend answered HTTP 502"),
    (RuntimeError(""), True, "RuntimeError: RuntimeError('')"),
    (RuntimeError("  \n  "), True, "RuntimeError: RuntimeError"),
    (KeyError("k"), False, "KeyError: 'k'"),
])
def test_exc_text(exc, where, want):
    assert engine.exc_text(exc, where) == want


def test_exc_text_of_an_error_whose_text_is_blank():
    class Blank(Exception):
        def __str__(self):
            return ""

        def __repr__(self):
            return " \n "
    assert engine.exc_text(Blank()) == "Blank: Blank"
    err = OSError("refused")
    err._request = types.SimpleNamespace(url="http://h:1/x")  # no method known
    assert engine.exc_text(err) == "OSError: refused (http://h:1/x)"


def test_forward_scope():
    scope = {"type": "http", "path": "/p", "headers": [(b"Authorization", b"x"), (b"Content-Length", b"1"),
                                                       (b"x-a", b"1")]}
    assert engine.forward_scope(scope, b"") == {"type": "http", "path": "/p", "asgi": {"spec_version": "2.3"},
                                                "headers": [(b"x-a", b"1"), (b"content-length", b"0")]}
    assert engine.forward_scope({"asgi": None}, b"ab") == {"asgi": {"spec_version": "2.3"},
                                                           "headers": [(b"content-length", b"2")]}


def test_upstream_passes_the_client_receive_and_notes_a_client_that_left():
    seen = []
    client = [{"type": "http.request", "body": b"more", "more_body": False}, {"type": "http.disconnect"}]

    async def app(scope, receive, send):
        seen.append(await receive())
        seen.append(await receive())
        seen.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def receive():
        return client.pop(0)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"body", receive)
        got = [await up.get(), await up.get()]
        return up, got

    up, got = asyncio.run(run())
    assert seen == [{"type": "http.request", "body": b"body", "more_body": False},
                    {"type": "http.request", "body": b"more", "more_body": False}, {"type": "http.disconnect"}]
    assert up.client_gone is True
    assert got == [("msg", {"type": "http.response.start", "status": 200, "headers": []}), ("end", None)]


def test_upstream_after_close():
    async def app(scope, receive, send):
        await receive()
        await asyncio.sleep(3600)

    async def never():
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"", never)
        await asyncio.sleep(0)
        assert up.queue.maxsize == 64 and not up.abort.is_set() and up.client_gone is False
        await up.queue.put(("msg", {"type": "stale"}))
        assert await up.close(grace=0.01) is True  # the app ignored the disconnect: it was cancelled
        assert up.abort.is_set() and up.queue.empty() and up.task.cancelled()
        assert await up.receive() == {"type": "http.disconnect"}  # at once, without the client's receive
        with pytest.raises(OSError) as err:
            await up.send({"type": "http.response.start"})
        await up._put(("end", None))
        assert up.queue.empty() and str(err.value) == "a3_proxy: the request is over"
        assert await up.close() is True  # a finished task: nothing to wait for
        return up

    asyncio.run(run())


def test_upstream_close_waits_for_a_task_that_unwinds():
    async def app(scope, receive, send):
        await receive()
        message = await receive()
        await asyncio.sleep(0.01)
        raise engine.BackendAnswer(400, b"", "x", message["type"])

    async def never():
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"", never)
        await asyncio.sleep(0)
        assert await up.close(grace=2) is True
        assert not up.task.cancelled() and up.task.exception() is None
        return up

    asyncio.run(run())


def test_upstream_get_with_a_timeout():
    async def app(scope, receive, send):
        await asyncio.sleep(3600)

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"", None)
        with pytest.raises(asyncio.TimeoutError):
            await up.get(0.01)
        await up.close(grace=0.01)

    asyncio.run(run())


def test_upstream_close_gives_the_task_its_grace_then_one_second_after_cancelling(monkeypatch):
    waits = []
    real = asyncio.wait_for

    async def recording(awaitable, timeout):
        waits.append(timeout)
        return await real(awaitable, 0.01)  # no real wait: the app below never ends by itself

    async def app(scope, receive, send):
        await receive()
        await asyncio.sleep(3600)  # a hung backend: the disconnect does not end it, the cancellation does

    async def run():
        up = engine.Upstream(app, {"type": "http", "headers": []}, b"", None)
        await asyncio.sleep(0)
        monkeypatch.setattr(engine.asyncio, "wait_for", recording)
        done = await up.close()
        monkeypatch.setattr(engine.asyncio, "wait_for", real)
        return done, up

    done, up = asyncio.run(run())
    assert done is True and up.task.cancelled() and waits == [3.0, 1.0]


def test_find_exception_ends_on_a_cycle_of_contexts():
    first, second = ValueError("a"), KeyError("b")
    first.__context__, second.__context__ = second, first
    assert engine.find_exception(first, engine.BackendAnswer) is None
    assert engine.find_exception(first, KeyError) is second
