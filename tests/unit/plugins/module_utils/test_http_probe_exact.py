# -*- coding: utf-8 -*-
"""plugins/module_utils/_http_probe.py, pinned exactly: what one GET reports (status and error text) for an answer,
an HTTP error, a refused connection, a silent server (the timeout is used) and a malformed URL; probe_all's whole
results, the timeout it hands on, its worker count; failing's lines."""
from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _http_probe as P
from helpers import loopback_server


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        code = {"/health": 200, "/created": 201, "/down": 503, "/teapot": 418}.get(self.path, 404)
        body = b"body" * 1000
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    yield from loopback_server(Handler)


@pytest.fixture
def silent():
    """A port that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield "http://127.0.0.1:%d/health" % sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("path, want", [
    ("/health", (200, "")),
    ("/created", (201, "")),
    ("/down", (503, "Service Unavailable")),
    ("/nope", (404, "Not Found")),
    ("/teapot", (418, "I'm a Teapot")),
])
def test_fetch_status_of_answers(base, path, want):
    assert P.fetch_status(base + path, 5) == want


def test_fetch_status_of_a_refused_connection():
    assert P.fetch_status("http://127.0.0.1:1/health", 2) == (None, "[Errno 111] Connection refused")


def test_fetch_status_of_a_silent_server_times_out_after_the_timeout_given(silent):
    start = time.monotonic()
    assert P.fetch_status(silent, 0.05) == (None, "timed out")
    assert time.monotonic() - start < 5  # open_url's own default is 10 s


@pytest.mark.parametrize("url, want", [
    ("not a url", (None, "unknown url type: 'not a url'")),
    ("http://[::1/", (None, "Invalid IPv6 URL")),
])
def test_fetch_status_of_a_malformed_url(url, want):
    assert P.fetch_status(url, 1) == want


def test_probe_all_results_are_whole_and_in_order(base):
    urls = [base + "/down", base + "/health", "http://127.0.0.1:1/x", base + "/created"]
    assert P.probe_all(urls, 5) == [
        {"url": base + "/down", "status": 503, "ok": False, "error": "Service Unavailable"},
        {"url": base + "/health", "status": 200, "ok": True, "error": ""},
        {"url": "http://127.0.0.1:1/x", "status": None, "ok": False, "error": "[Errno 111] Connection refused"},
        {"url": base + "/created", "status": 201, "ok": False, "error": "HTTP 201"},
    ]


@pytest.mark.parametrize("answer, want", [
    ((200, "ignored"), {"url": "u", "status": 200, "ok": True, "error": ""}),
    ((500, ""), {"url": "u", "status": 500, "ok": False, "error": "HTTP 500"}),
    ((None, ""), {"url": "u", "status": None, "ok": False, "error": "HTTP None"}),
    ((302, "Found"), {"url": "u", "status": 302, "ok": False, "error": "Found"}),
])
def test_probe_all_error_text(answer, want):
    assert P.probe_all(iter(["u"]), 3, fetch=lambda u, t: answer) == [want]


def test_probe_all_hands_the_timeout_to_each_fetch():
    seen = []
    P.probe_all(["a", "b"], 2.5, fetch=lambda u, t: seen.append((u, t)) or (200, ""))
    assert sorted(seen) == [("a", 2.5), ("b", 2.5)]


def _most_at_once(count, wait, **kwargs):
    """The most fetches that ran at once for ``count`` URLs; each fetch waits (at most ``wait`` seconds) for all
    ``count`` to run at once."""
    cond, state = threading.Condition(), {"now": 0, "most": 0}

    def fetch(url, timeout):
        with cond:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            cond.notify_all()
            cond.wait_for(lambda: state["most"] >= count, timeout=wait)
            state["now"] -= 1
        return 200, ""
    assert [r["ok"] for r in P.probe_all(["u%d" % i for i in range(count)], 1, fetch=fetch, **kwargs)] == [True] * count
    return state["most"]


def test_probe_all_uses_at_most_the_workers_asked_and_at_least_one():
    assert _most_at_once(2, 0.05, workers=1) == 1
    assert _most_at_once(2, 0.05, workers=0) == 1
    assert _most_at_once(3, 0.05, workers=2) <= 2


def test_probe_all_asks_at_once_up_to_the_workers():
    assert _most_at_once(2, 5, workers=2) == 2
    assert _most_at_once(3, 5) == 3


def test_probe_all_asks_at_most_eight_at_once_by_default():
    assert _most_at_once(9, 0.1) <= 8


def test_failing_lines():
    results = [{"url": "a", "ok": True, "error": ""}, {"url": "b", "ok": False, "error": "HTTP 500"},
               {"url": "c", "ok": False, "error": "timed out"}]
    assert P.failing(results) == ["b: HTTP 500", "c: timed out"]
