# -*- coding: utf-8 -*-
"""a3proxy.core, what the listeners ask of it besides completions: drain and undrain, the upstream's
/instances, /v1/models from a backend, the health answers, /a3/backends and /metrics (stand-in clients)."""
from __future__ import annotations

import asyncio
import json

import httpx
from a3proxy import auth, core
from a3proxy.metrics import render_metrics

from proxy_fakes import fake_upstream, options

P, D = "10.0.0.1:1", "10.0.0.2:2"


def make(prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), secrets=auth.Secrets((), "", ""), up=True,
         **opts):
    upstream = fake_upstream(prefills, decodes)
    proxy = core.HonestProxy(upstream, options(**opts), secrets)
    if up:
        for backend in proxy.backends.values():
            backend.observe(True, "HTTP 200", 0.0)
    return proxy, upstream.proxy_state


def call(coroutine_fn, *args):
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(coroutine_fn(*(args + (send,))))
    return sent


def answer(sent):
    """(status, {header: value}, body) of a whole answer."""
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


# ----------------------------------------------------------------------------- drain

def drain(proxy, path, backends):
    status, _unused, body = answer(call(proxy.drain, path, json.dumps({"backends": backends}).encode()))
    return status, json.loads(body)


def test_drain_and_undrain_say_what_changed(logs):
    proxy, _unused = make(decodes=(("10.0.0.2", 2), ("10.0.0.3", 3)))
    status, body = drain(proxy, "/a3/drain", [D, "10.0.0.3:3"])
    assert status == 200 and body["drained"] == [D, "10.0.0.3:3"] and body["changed"] == [D, "10.0.0.3:3"]
    assert [(s["role"], s["backend"], s["drained"]) for s in body["backends"]] == [
        ("decode", D, True), ("decode", "10.0.0.3:3", True)]
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 2}
    assert logs() == [("WARNING", "drained for maintenance (kept out of the selection): 10.0.0.2:2, 10.0.0.3:3")]
    status, body = drain(proxy, "/a3/drain", [D])
    assert body["drained"] == [D, "10.0.0.3:3"] and body["changed"] == [] and logs() == []
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 2}
    status, body = drain(proxy, "/a3/undrain", [D, P])
    assert status == 200 and body["drained"] == ["10.0.0.3:3"] and body["changed"] == [D]
    assert [(s["role"], s["backend"], s["drained"]) for s in body["backends"]] == [("decode", D, False),
                                                                                   ("prefill", P, False)]
    assert logs() == [("WARNING", "undrained (back in the selection): 10.0.0.2:2")]
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 3} and proxy.drained == {"10.0.0.3:3"}
    status, body = drain(proxy, "/a3/undrain", [P])
    assert body["changed"] == [] and logs() == []


def test_a_drain_naming_an_unknown_backend_is_a_400():
    proxy, _unused = make()
    status, headers, body = answer(call(proxy.drain, "/a3/drain", b'{"backends": ["x:1"]}'))
    assert status == 400 and headers[b"content-type"] == b"application/json"
    assert json.loads(body) == {"error": {"message": "unknown backend x:1: the proxy has 10.0.0.1:1, 10.0.0.2:2",
                                          "type": "BadRequestError", "code": 400}}
    assert proxy.drained == set() and proxy.counters == {}


# ----------------------------------------------------------------------------- /instances

def test_instances_go_to_the_upstream_app_with_the_body_read():
    seen = []

    async def app(scope, receive, send):
        seen.append((scope["path"], dict(scope["headers"]), await receive(), await receive()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    proxy, _unused = make()
    proxy.up.app = app

    async def receive():
        return {"type": "http.disconnect"}

    scope = {"type": "http", "path": "/instances/add", "headers": [(b"authorization", b"Bearer t")]}
    sent = call(proxy.instances, scope, b'{"type": "decode"}', receive)
    assert seen == [("/instances/add", {b"content-length": b"18"},
                     {"type": "http.request", "body": b'{"type": "decode"}', "more_body": False},
                     {"type": "http.disconnect"})]
    assert [m.get("status", m.get("body")) for m in sent] == [200, b"ok"]


# ----------------------------------------------------------------------------- /v1/models

class Api(object):
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    async def get(self, url, headers=None):
        self.calls.append((url, headers))
        found = self.answers[url]
        if isinstance(found, BaseException):
            raise found
        return httpx.Response(found[0], content=found[1])


MODELS = b'{"object": "list", "data": [{"id": "m", "root": "/models/m at 10.0.0.2:2"}]}'
DM, PM = "http://10.0.0.2:2/v1/models", "http://10.0.0.1:1/v1/models"


def test_the_models_come_from_a_decode_first_with_the_backend_key_and_no_address(logs):
    proxy, _unused = make(secrets=auth.Secrets((), "", "bk"))
    proxy._api_client = Api({DM: (200, MODELS), PM: (200, b"{}")})
    status, headers, body = answer(call(proxy.models))
    scrubbed = MODELS.replace(b"10.0.0.2:2", b"[address hidden]")
    assert (status, headers, body) == (200, {b"content-type": b"application/json",
                                             b"content-length": str(len(scrubbed)).encode()}, scrubbed)
    assert proxy._api_client.calls == [(DM, {"Authorization": "Bearer bk"})]
    assert proxy.requests == {("/v1/models", "200"): 1} and proxy.counters == {} and logs() == []


def test_the_models_are_asked_of_the_least_busy_backend_of_a_role_first():
    proxy, state = make(decodes=(("10.0.0.2", 2), ("10.0.0.3", 3), ("10.0.0.4", 4)))
    busy = proxy.up.proxy_state
    request = type("Open", (), {})()
    request.ledger = type("Ledger", (), {"backends": lambda self: {D, "10.0.0.3:3"}})()
    proxy.open.add(request)
    proxy._api_client = Api({"http://10.0.0.4:4/v1/models": (200, b"{}")})
    assert answer(call(proxy.models))[0] == 200 and busy is state
    assert proxy._api_client.calls == [("http://10.0.0.4:4/v1/models", {})]


def test_the_models_go_on_to_the_next_backend_and_at_most_three(logs):
    proxy, _unused = make(prefills=(("10.0.0.1", 1), ("fe80::1", 5)), decodes=(("10.0.0.2", 2), ("10.0.0.3", 3)))
    v6 = "http://[fe80::1]:5/v1/models"
    request = httpx.Request("GET", DM)
    proxy._api_client = Api({DM: httpx.ConnectError("refused", request=request),
                             "http://10.0.0.3:3/v1/models": (503, b"loading " * 40),
                             PM: (200, b"[1]"), v6: (200, MODELS)})
    status, _unused, body = answer(call(proxy.models))
    assert status == 502 and json.loads(body) == {"error": {"message": "no healthy backend answered the model list",
                                                            "type": "BadGatewayError", "code": 502}}
    assert [c[0] for c in proxy._api_client.calls] == [DM, "http://10.0.0.3:3/v1/models", PM]
    assert proxy.requests == {("/v1/models", "502"): 1}
    assert proxy.counters == {"a3_proxy_upstream_errors_total": 1}
    assert logs() == [
        ("WARNING", "/v1/models: decode backend 10.0.0.2:2: ConnectError: refused (GET %s)" % DM),
        ("WARNING", "/v1/models: decode backend 10.0.0.3:3 answered HTTP 503: %s..." % ("loading " * 40)[:200]),
        ("WARNING", "/v1/models: prefill backend 10.0.0.1:1 answered HTTP 200: [1]")]


def test_the_models_of_an_ipv6_backend():
    proxy, _unused = make(prefills=(("fe80::1", 5),), decodes=())
    proxy._api_client = Api({"http://[fe80::1]:5/v1/models": (200, b"{}")})
    assert answer(call(proxy.models))[2] == b"{}"


def test_without_a_usable_backend_the_models_are_a_503(logs):
    proxy, _unused = make(up=False)
    proxy._api_client = Api({})
    status, headers, body = answer(call(proxy.models))
    assert status == 503 and headers[b"retry-after"] == b"10"
    assert json.loads(body)["error"] == {"message": "no healthy backend in rotation to list the models; retry later",
                                         "type": "ServiceUnavailableError", "code": 503}
    assert proxy.counters == {"a3_proxy_no_backend_total": 1} and proxy.requests == {("/v1/models", "503"): 1}
    assert proxy._api_client.calls == [] and logs() == []


# ----------------------------------------------------------------------------- health, backends, metrics

def test_the_health_answers():
    proxy, _unused = make()
    assert proxy.full_health() == (200, {"status": "ok", "healthy_prefill": 1, "healthy_decode": 1,
                                         "prefill_instances": 1, "decode_instances": 1})
    assert proxy.public_health() == (200, {"status": "ok"})
    proxy.drained.add(D)
    status, body = proxy.full_health()
    assert status == 503 and body["missing"] == ["decode"]
    assert proxy.public_health() == (503, {"status": "unavailable", "missing": ["decode"],
                                           "message": "no healthy decode backend in rotation; retry later"})


def test_the_backends_answer_is_sorted_by_role_and_address():
    proxy, _unused = make(prefills=(("10.0.0.9", 9), ("10.0.0.1", 1)), decodes=(("10.0.0.3", 3), ("10.0.0.2", 2)))
    assert [(s["role"], s["backend"]) for s in proxy.backends_answer()] == [
        ("decode", "10.0.0.2:2"), ("decode", "10.0.0.3:3"), ("prefill", "10.0.0.1:1"), ("prefill", "10.0.0.9:9")]


def test_the_metrics_carry_every_count_and_state():
    proxy, _unused = make(a3_ds_worker=["w1"])
    proxy.count("a3_proxy_busy_total")
    proxy.count_request("/v1/completions", 200)
    proxy.admission.enter()
    text = proxy.metrics_text()
    assert text == render_metrics({("/v1/completions", "200"): 1}, proxy.snapshots(), {"a3_proxy_busy_total": 1},
                                  proxy.started, None, None, 1)
    assert "process_start_time_seconds %d" % int(proxy.started) in text and "a3_proxy_open_requests 1" in text
    assert "a3_proxy_ds_worker_registered" not in text and "a3_proxy_etcd_read_ok" not in text
    proxy.etcd_ok, proxy.ds_workers = True, {"w1": 1}
    text = proxy.metrics_text()
    assert "a3_proxy_etcd_read_ok 1" in text and 'a3_proxy_ds_worker_registered{worker="w1"} 1' in text


def test_an_error_answer_is_counted_for_its_endpoint_and_scrubbed():
    proxy, _unused = make(decodes=(("node-d1", 2),))
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(proxy.error(send, "/v1/x", 503, "down: node-d1:2", [(b"retry-after", b"3")]))
    status, headers, body = answer(sent)
    assert status == 503 and headers[b"retry-after"] == b"3"
    assert json.loads(body)["error"]["message"] == "down: [address hidden]"
    assert proxy.requests == {("/v1/x", "503"): 1}
    asyncio.run(proxy.error(send, "", 404, "no"))
    assert proxy.requests == {("/v1/x", "503"): 1}


def test_the_models_of_named_backends_name_none():
    proxy, _unused = make(prefills=(("node-p1", 1),), decodes=(("node-d1", 2),))
    proxy._api_client = Api({"http://node-d1:2/v1/models": (200, b'{"root": "node-d1 /models"}')})
    assert answer(call(proxy.models))[2] == b'{"root": "[address hidden] /models"}'


def test_the_models_ask_a_prefill_only_after_every_decode():
    proxy, _unused = make(prefills=(("10.0.0.0", 1),), decodes=(("10.0.0.5", 2), ("10.0.0.6", 2)))
    proxy._api_client = Api({"http://10.0.0.5:2/v1/models": (500, b""), "http://10.0.0.6:2/v1/models": (500, b""),
                             "http://10.0.0.0:1/v1/models": (500, b"")})
    call(proxy.models)
    assert [c[0] for c in proxy._api_client.calls] == ["http://10.0.0.5:2/v1/models", "http://10.0.0.6:2/v1/models",
                                                       "http://10.0.0.0:1/v1/models"]
