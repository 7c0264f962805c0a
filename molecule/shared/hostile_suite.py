# -*- coding: utf-8 -*-
"""The hostile-client suite: what a careless or hostile client on the network gets from the deployed serving edge.

Not a test module by itself: molecule/default/tests/test_hostile.py (the seed's configuration: no keys) and
molecule/rolling/tests/test_hostile.py (every protection on) import its tests and define the fixture `edge`, a dict:
  proxy        the public URL of the proxy (what clients reach)
  admin        the admin listener's URL as the proxy host reaches it (its loopback by default)
  admin_node   the proxy host: admin requests are made from its network namespace (sim/lib/netns.py; the same as
               this machine's while the nodes share it, A3SIM_NET=host)
  api_key      a client key of the proxy, or None when the proxy takes requests without one
  admin_token  the admin token, or None
  engine_key   the engines' key, or None
  engines      the engine ranks' base URLs
  limits       the proxy's limits as the inventory sets them: max_body_bytes, header_timeout, body_timeout,
               idle_timeout, max_inflight
Every test asserts the status and the body's shape, and (fixture `still_serving`) that a normal chat through the
proxy gets a real answer right after. Traffic goes to 127.0.0.0/8 only.
"""
from __future__ import annotations

import http.client
import json
import re
import socket
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "lib"))
import netns  # noqa: E402  (sim/lib/netns.py)

MODEL = "glm-5.1"
FIXTURES = ("still_serving", "stalled_decode")   # what a scenario's module takes over besides the test_ functions
# What would name an internal address in a client body: an IP literal, or host:port.
ADDRESS_RE = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|\b[a-z0-9.-]+:\d{2,5}\b", re.IGNORECASE)
# vllm-router's request id, which the engines echo as a completion's id: it names the prefill and decode backend it
# chose (the router's convention for NIXL/P2P transfers; a documented difference of proxy_engine vllm-router).
ROUTER_ID_RE = re.compile(r"___prefill_addr_[^_\s\"]+___decode_addr_[^_\s\"]+_[0-9a-f]+")


# ------------------------------------------------------------------------------------------------ HTTP

def request(url, method="GET", body=None, headers=None, timeout=30.0, raw=None):
    """(status, headers dict with lower-case names, body bytes). body: a dict (sent as JSON) or None; raw: bytes."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    try:
        conn.request(method, parts.path + (("?" + parts.query) if parts.query else ""), body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def bearer(key):
    return {"Authorization": "Bearer %s" % key} if key else {}


def chat_body(**extra):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "temperature": 0}
    body.update(extra)
    return body


def json_of(data):
    try:
        return json.loads(data)
    except ValueError:
        return None


def assert_openai_error(status, body, code):
    """An OpenAI-style error: {"error": {"message": str, "type": str, "code": ...}} and no internal address."""
    assert status == code, (status, body[:500])
    doc = json_of(body)
    assert isinstance(doc, dict) and isinstance(doc.get("error"), dict), body[:500]
    assert isinstance(doc["error"].get("message"), str) and doc["error"]["message"], doc
    assert isinstance(doc["error"].get("type"), str), doc
    assert_no_address(body)
    return doc["error"]


def assert_no_address(body, router_ids=False):
    """No internal address in a body a client gets; with router_ids, the router's request ids (ROUTER_ID_RE) are
    the one place an address may appear."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    if router_ids:
        text = ROUTER_ID_RE.sub("router-id", text)
    found = [m for m in ADDRESS_RE.findall(text) if not m.lower().startswith(("glm-5.1", "http:", "https:"))]
    assert not found, "a client body names internal addresses %s: %s" % (found, text[:500])


def good_chat(edge, timeout=60.0):
    """A normal chat through the proxy with the client key: a real answer (content and completion tokens)."""
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(),
                                    bearer(edge["api_key"]), timeout=timeout)
    doc = json_of(body)
    ok = (status == 200 and isinstance(doc, dict) and doc.get("choices")
          and (doc["choices"][0].get("message") or {}).get("content")
          and (doc.get("usage") or {}).get("completion_tokens", 0) > 0)
    return bool(ok), status, body


def admin(edge, path, method="GET", body=None, token=True, headers=None):
    """A request to the admin listener, made from the proxy host (edge["admin_node"])."""
    hdrs = headers if headers is not None else bearer(edge["admin_token"]) if token else {}
    return netns.in_node(edge["admin_node"], request, edge["admin"] + path, method, body, hdrs, timeout=10)


def backends(edge):
    status, _unused, body = admin(edge, "/a3/backends")
    assert status == 200, (status, body[:300])
    return json.loads(body)


@pytest.fixture
def still_serving(edge):
    """Runs the test, then requires a real answer through the proxy right after (within 60 s)."""
    yield
    deadline = time.monotonic() + 60
    while True:
        ok, status, body = good_chat(edge)
        if ok:
            return
        assert time.monotonic() < deadline, "the cluster stopped answering after the test: HTTP %s %s" % (
            status, body[:300])
        time.sleep(2)


# ------------------------------------------------------------------------------------------------ no admin surface

@pytest.mark.parametrize("method, path", [
    ("POST", "/instances/add"), ("POST", "/instances/remove"), ("POST", "/a3/drain"), ("POST", "/a3/undrain"),
    ("GET", "/a3/backends"), ("GET", "/metrics"), ("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/redoc"),
    ("GET", "/docs/oauth2-redirect"), ("GET", "/admin"), ("GET", "/../a3/backends"),
])
def test_no_admin_path_on_the_public_listener(edge, still_serving, method, path):
    before = backends(edge)
    body = {"type": "decode", "instances": ["127.0.0.1:9"]} if "instances" in path else {
        "backends": [b["backend"] for b in before]}
    status, _unused, data = request(edge["proxy"] + path, method, body if method == "POST" else None,
                                    bearer(edge["api_key"]))
    assert status in (404, 405), (path, status, data[:300])
    assert_no_address(data)
    after = backends(edge)
    assert [(b["backend"], b["in_rotation"], b["drained"]) for b in after] == \
        [(b["backend"], b["in_rotation"], b["drained"]) for b in before]


def test_instances_add_from_the_public_address_does_not_reach_the_rotation(edge, still_serving):
    """The attack of the issue: a client's own address put into the decode rotation through the public port."""
    request(edge["proxy"] + "/instances/add", "POST", {"type": "decode", "instances": ["127.0.0.1:9"]},
            bearer(edge["api_key"]))
    time.sleep(1)
    assert all("127.0.0.1:9" != b["backend"] for b in backends(edge))


def test_the_admin_listener_is_not_on_the_public_address(edge):
    public = urllib.parse.urlsplit(edge["proxy"]).hostname
    port = urllib.parse.urlsplit(edge["admin"]).port
    with pytest.raises(OSError):
        socket.create_connection((public, port), timeout=3).close()


def test_public_healthcheck_is_open_and_names_no_address(edge):
    status, _unused, body = request(edge["proxy"] + "/healthcheck")
    assert status == 200, body[:300]
    assert json.loads(body)["status"] == "ok"
    assert_no_address(body)


# ------------------------------------------------------------------------------------------------ keys

def test_the_readme_chat_works_with_the_key(edge):
    ok, status, body = good_chat(edge)
    assert ok, (status, body[:500])


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong-key"}, {"Authorization": "Bearer "}, {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "bearer"}, {"X-Api-Key": "anything"},
])
def test_a_request_without_a_valid_key_gets_401(edge, still_serving, headers):
    if not edge["api_key"]:
        pytest.skip("the proxy takes requests without a key here (the seed's configuration)")
    for path, method, body in (("/v1/chat/completions", "POST", chat_body()),
                               ("/v1/completions", "POST", {"model": MODEL, "prompt": "hi", "max_tokens": 4}),
                               ("/v1/models", "GET", None)):
        status, hdrs, data = request(edge["proxy"] + path, method, body, headers)
        err = assert_openai_error(status, data, 401)
        assert "www-authenticate" in hdrs, hdrs
        assert edge["api_key"] not in data.decode("utf-8", "replace")
        assert err.get("code") == "invalid_api_key", err


def test_without_keys_the_proxy_answers_anyone(edge):
    if edge["api_key"]:
        pytest.skip("keys are on here")
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body())
    assert status == 200 and json.loads(body)["choices"], body[:300]


def test_models_lists_the_served_model(edge):
    status, _unused, body = request(edge["proxy"] + "/v1/models", headers=bearer(edge["api_key"]))
    assert status == 200, body[:300]
    doc = json.loads(body)
    assert doc.get("object") == "list" and MODEL in [m.get("id") for m in doc.get("data", [])], doc
    assert_no_address(body)


def test_the_admin_token_is_required_when_set(edge):
    if not edge["admin_token"]:
        status, _unused, _body = admin(edge, "/a3/backends", token=False)
        assert status == 200
        return
    for method, path in (("GET", "/a3/backends"), ("GET", "/metrics"), ("POST", "/a3/drain"), ("POST", "/a3/undrain"),
                         ("POST", "/instances/add")):
        status, _unused, data = admin(edge, path, method, {"backends": []} if method == "POST" else None,
                                      headers={"Authorization": "Bearer not-the-token"})
        assert status == 401, (path, status, data[:200])
    status, _unused, _body = admin(edge, "/healthcheck", token=False)
    assert status in (200, 503)


def test_an_engine_without_its_key_refuses_v1_but_answers_health(edge):
    base = edge["engines"][0]
    assert request(base + "/health")[0] == 200
    status, _unused, body = request(base + "/v1/completions", "POST", {"model": MODEL, "prompt": "hi", "max_tokens": 2})
    if not edge["engine_key"]:
        assert status == 200, body[:300]
        return
    assert status == 401, body[:300]
    status, _unused, body = request(base + "/v1/completions", "POST", {"model": MODEL, "prompt": "hi", "max_tokens": 2},
                                    bearer(edge["engine_key"]))
    assert status == 200, body[:300]


# ------------------------------------------------------------------------------------------------ bad requests

def test_a_backend_4xx_reaches_the_client_once_and_marks_nothing(edge, still_serving):
    before = {b["backend"]: b["request_failures"] for b in backends(edge)}
    status, hdrs, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(max_tokens=-5),
                                 bearer(edge["api_key"]))
    err = assert_openai_error(status, body, 400)
    assert "max_tokens" in err["message"], err
    assert "retry-after" not in hdrs
    time.sleep(1)
    after = {b["backend"]: b["request_failures"] for b in backends(edge)}
    assert after == before, (before, after)
    assert all(b["state"] == "up" and b["in_rotation"] for b in backends(edge))


@pytest.mark.parametrize("model, code", [("no-such-model", 404)])
def test_an_unknown_model_is_the_engines_answer(edge, still_serving, model, code):
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(model=model),
                                    bearer(edge["api_key"]))
    assert_openai_error(status, body, code)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\"text\"", b""])
def test_a_body_that_is_not_a_json_object_gets_400(edge, still_serving, raw):
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", raw=raw,
                                    headers=bearer(edge["api_key"]))
    assert_openai_error(status, body, 400)


def raw_exchange(edge, data, timeout):
    """Send raw bytes to the proxy's public port and read what it sends until it closes the connection or is silent
    for `timeout` s: (bytes received, seconds from the send to the end)."""
    parts = urllib.parse.urlsplit(edge["proxy"])
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
    try:
        sock.sendall(data)
        t0 = time.monotonic()
        got = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                return got, time.monotonic() - t0
            got += chunk
    finally:
        sock.close()


def auth_line(edge):
    return ("Authorization: Bearer %s\r\n" % edge["api_key"]).encode() if edge["api_key"] else b""


def test_a_50_mb_body_gets_413_before_anything_is_forwarded(edge, still_serving):
    """As curl sends a large body: headers with Expect: 100-continue first. The proxy answers 413 from Content-Length
    without reading the body (and never asks for it)."""
    cap = edge["limits"]["max_body_bytes"]
    size = 50 * 1024 * 1024
    assert size > cap
    got, waited = raw_exchange(edge, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                               b"\r\n" + auth_line(edge) + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % size, 5)
    assert got.startswith(b"HTTP/1.1 413"), got[:300]
    assert_openai_error(413, got.partition(b"\r\n\r\n")[2], 413)
    assert waited < 15


def test_a_50_mb_body_sent_at_once_is_refused_without_taking_it(edge, still_serving):
    """A client that does not wait for 100-continue: the proxy answers 413 and closes; either the client reads the 413
    or its send fails when the proxy stops reading. The proxy never reads 50 MB into memory."""
    cap = edge["limits"]["max_body_bytes"]
    big = json.dumps(chat_body(messages=[{"role": "user", "content": "x" * (50 * 1024 * 1024)}])).encode()
    assert len(big) > cap
    try:
        status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", raw=big,
                                        headers=bearer(edge["api_key"]), timeout=60)
    except (ConnectionResetError, BrokenPipeError):
        return
    assert_openai_error(status, body, 413)


def test_a_chunked_body_over_the_cap_gets_413(edge, still_serving):
    cap = edge["limits"]["max_body_bytes"]
    parts = urllib.parse.urlsplit(edge["proxy"])
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    chunk = b"x" * (1024 * 1024)

    def gen():
        yield b'{"model": "glm-5.1", "messages": [{"role": "user", "content": "'
        for _unused in range(cap // len(chunk) + 2):
            yield chunk
        yield b'"}]}'
    try:
        conn.request("POST", "/v1/chat/completions", body=gen(), encode_chunked=True,
                     headers=dict(bearer(edge["api_key"]), **{"Content-Type": "application/json",
                                                              "Transfer-Encoding": "chunked"}))
        resp = conn.getresponse()
        status, body = resp.status, resp.read()
    except (ConnectionResetError, BrokenPipeError):
        return  # the proxy stopped reading after the cap and closed: nothing was forwarded either
    finally:
        conn.close()
    # haproxy (proxy_engine vllm-router) takes a completion's body only with a Content-Length: 411 at once
    assert_openai_error(status, body, 411 if edge["engine"] == "vllm-router" else 413)


def test_client_kv_transfer_params_are_dropped(edge, still_serving):
    """A client cannot steer decode to its own KV source: its kv_transfer_params never reach an engine, so the
    answer is the normal one."""
    bogus = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": "evil",
             "remote_block_ids": [1, 2, 3], "remote_host": "127.0.0.1", "remote_port": 9}
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(kv_transfer_params=bogus),
                                    bearer(edge["api_key"]))
    assert status == 200, body[:500]
    doc = json.loads(body)
    assert doc["choices"][0]["message"]["content"] and doc["usage"]["completion_tokens"] > 0, doc


def test_a_slow_header_client_is_cut_off(edge, still_serving):
    """A slowloris client: headers that never end are cut within the header timeout."""
    limit = edge["limits"]["header_timeout"]
    got, waited = raw_exchange(edge, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", limit + 15)
    assert waited <= limit + 5, "the proxy kept a half-sent request open %.1f s (header timeout %s)" % (waited, limit)
    assert got == b"" or got.startswith(b"HTTP/1.1 408") or got.startswith(b"HTTP/1.1 400"), got[:200]


def test_a_slow_body_client_gets_408(edge, still_serving):
    limit = edge["limits"]["body_timeout"]
    got, waited = raw_exchange(edge, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                               b"\r\n" + auth_line(edge) + b"Content-Length: 100\r\n\r\n{\"model\":", limit + 15)
    assert waited <= limit + 5, waited
    assert got.startswith(b"HTTP/1.1 408"), got[:300]
    assert_openai_error(408, got.partition(b"\r\n\r\n")[2], 408)


def test_the_concurrency_limit_gives_503_with_retry_after(edge, still_serving):
    """More open requests than the proxy takes: the surplus gets 503 with Retry-After at once, the rest answers."""
    limit = edge["limits"]["max_inflight"]
    results = []
    lock = threading.Lock()

    def one():
        try:
            status, hdrs, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(max_tokens=64),
                                         bearer(edge["api_key"]), timeout=120)
        except OSError as exc:
            status, hdrs, body = 0, {}, str(exc).encode()
        with lock:
            results.append((status, hdrs, body))
    threads = [threading.Thread(target=one) for _unused in range(limit * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    statuses = sorted(s for s, _h, _b in results)
    refused = [(h, b) for s, h, b in results if s == 503]
    assert statuses.count(200) >= 1, statuses
    assert all(s in (200, 503) for s in statuses), statuses
    assert refused, "no request was refused with %d clients and a limit of %d: %s" % (limit * 3, limit, statuses)
    for hdrs, body in refused:
        assert "retry-after" in hdrs, hdrs
        assert_openai_error(503, body, 503)


def test_load_counters_return_to_zero_after_failed_requests(edge, still_serving):
    for _unused in range(5):
        request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(max_tokens=-5), bearer(edge["api_key"]))
        request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(model="no-such-model"),
                bearer(edge["api_key"]))
    deadline = time.monotonic() + 15
    while True:
        loads = {b["backend"]: (b["outstanding_load"], b["inflight_requests"]) for b in backends(edge)}
        if all(load < 1.0 and n == 0 for load, n in loads.values()):
            return
        assert time.monotonic() < deadline, loads
        time.sleep(1)


# ------------------------------------------------------------------------------------------------ settings

def load_vars(path, vault_password_file=None):
    """A vars file as Ansible reads it, !vault values decrypted with the password file (the hardened scenario keeps its
    keys in Ansible Vault, as a site would)."""
    import yaml  # the controller's venv has it (ansible-core)

    class Loader(yaml.SafeLoader):
        pass

    def vault(loader, node):
        from ansible.parsing.vault import VaultLib, VaultSecret
        secret = VaultSecret(vault_password_file.read_bytes().strip())
        return VaultLib([("default", secret)]).decrypt(loader.construct_scalar(node)).decode()

    if vault_password_file is not None:
        Loader.add_constructor("!vault", vault)
    return yaml.load(path.read_text(), Loader=Loader) or {}  # noqa: S506 (SafeLoader plus !vault)


def edge_settings(root, *extra_files, vault_password_file=None):
    """The `edge` dict of the simulated cluster, from the proxy role's defaults, the simulation's group_vars and the
    scenario's extra-vars files (in that order, later wins): the same values the deployment used."""
    values = {}
    for path in ("roles/common/defaults/main.yml", "roles/proxy/defaults/main.yml", "roles/vllm/defaults/main.yml",
                 "inventories/sim/group_vars/all/simulation.yml") + tuple(extra_files):
        values.update(load_vars(root / path, vault_password_file))
    ips = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
    keys = values.get("proxy_api_keys") or []
    return {
        "proxy": "http://%s:%d" % (ips["p0"], int(values["proxy_port"])),
        "admin": "http://%s:%d" % (values["proxy_admin_bind_host"], int(values["proxy_admin_port"])),
        "admin_node": "p0",
        "api_key": keys[0] if keys else None,
        "admin_token": values.get("proxy_admin_token") or None,
        "engine_key": values.get("vllm_api_key") or None,
        "engines": ["http://%s:%d" % (ips[n], int(values["vllm_api_port"])) for n in ("p0", "d0")],
        # the canary's period plus its request timeout: the longest a canary round takes to come round
        "canary_round": float(values.get("vllm_canary_interval", 60)) + float(values.get("vllm_canary_timeout", 30)),
        "engine": values.get("proxy_engine") or "upstream",
        "limits": dict({name: int(values["proxy_" + name]) for name in ("max_body_bytes", "max_inflight")},
                       **{name: float(values["proxy_" + name]) for name in
                          ("header_timeout", "body_timeout", "idle_timeout", "first_byte_timeout")}),
    }


# ------------------------------------------------------------------------------------------------ stalled decode

def _set_fault(node, fault):
    """Write (or with None remove) the simulated node's fault file (docs/SIM-CONTRACT.md)."""
    import faultsuite  # sim/lib, on the path of the scenario's test modules
    if fault is None:
        faultsuite.node_sh(node, "rm -f /etc/a3sim/faults.json")
    else:
        faultsuite.node_sh(node, "mkdir -p /etc/a3sim && printf '%%s' %s > /etc/a3sim/faults.json.tmp && "
                           "mv /etc/a3sim/faults.json.tmp /etc/a3sim/faults.json" % faultsuite._q(json.dumps(fault)))


@pytest.fixture
def stalled_decode(edge):
    """Every decode engine answers, then stops midway (engine_stall: a rank frozen mid-answer), until the test ends.
    Then one canary round passes with the engines well again, so that two stalls in a row never add up to the
    canary's hang verdict (a restart of the decode groups in the middle of the suite)."""
    fault = {"engine_stall": {"since": time.time() + 3600}}
    for node in ("d0", "d1"):
        _set_fault(node, fault)
    try:
        yield
    finally:
        for node in ("d0", "d1"):
            _set_fault(node, None)
        time.sleep(edge["canary_round"])


def test_a_stream_stalled_after_its_first_byte_ends_with_an_error_event(edge, still_serving, stalled_decode):
    """The wrapper ends a stalled stream after proxy_idle_timeout with an SSE error event and [DONE]. haproxy
    (proxy_engine vllm-router) cannot write into a stream: it cuts the stalled stream after proxy_first_byte_timeout
    (its server timeout), so the client sees the transfer end without [DONE] (a documented difference)."""
    router = edge["engine"] == "vllm-router"
    limit = edge["limits"]["first_byte_timeout" if router else "idle_timeout"]
    parts = urllib.parse.urlsplit(edge["proxy"])
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=limit + 30)
    t0 = time.monotonic()
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(stream=True, max_tokens=16)),
                     headers=dict(bearer(edge["api_key"]), **{"Content-Type": "application/json"}))
        resp = conn.getresponse()
        status = resp.status
        try:
            body = resp.read()
        except http.client.IncompleteRead as exc:
            assert router, "the wrapper cut a stalled stream instead of ending it with an error event"
            body = exc.partial
    finally:
        conn.close()
    waited = time.monotonic() - t0
    assert status == 200, body[:300]
    events = [line[len(b"data: "):] for line in body.split(b"\n") if line.startswith(b"data: ")]
    if router:
        assert events and b"[DONE]" not in events, body[-500:]   # tokens came, then the cut: no end of stream
    else:
        assert events and events[-1] == b"[DONE]", body[-500:]
        errors = [json_of(e) for e in events[:-1] if isinstance(json_of(e), dict) and "error" in json_of(e)]
        assert errors, "no error event in a stalled stream: %s" % body[-500:]
    assert_no_address(body, router_ids=router)
    assert limit - 1 <= waited <= limit + 10, "the stalled stream ended after %.1f s (bound %s s)" % (waited, limit)


def test_a_non_stream_answer_stalled_midway_gets_504(edge, still_serving, stalled_decode):
    # haproxy's server timeout is proxy_first_byte_timeout: a non-stream answer's first byte is its last
    limit = edge["limits"]["first_byte_timeout" if edge["engine"] == "vllm-router" else "idle_timeout"]
    t0 = time.monotonic()
    status, _unused, body = request(edge["proxy"] + "/v1/chat/completions", "POST", chat_body(max_tokens=16),
                                    bearer(edge["api_key"]), timeout=limit + 30)
    waited = time.monotonic() - t0
    assert_openai_error(status, body, 504)
    assert waited <= limit + 10, waited
