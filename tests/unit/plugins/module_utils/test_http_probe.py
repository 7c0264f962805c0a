# -*- coding: utf-8 -*-
"""http_probe: one call for a list of URLs, each status in order; a real loopback server for the fetch."""
from __future__ import annotations

import http.server
import time

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _http_probe as P
from helpers import loopback_server


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/slow":
            time.sleep(0.5)
        code = {"/health": 200, "/metrics": 200, "/slow": 200, "/down": 503}.get(self.path, 404)
        body = b"ok" if code == 200 else b"no"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    yield from loopback_server(Handler)


def test_statuses_in_the_order_given(base):
    res = P.probe_all([base + "/metrics", base + "/down", base + "/health", base + "/nope"], 5)
    assert [r["url"] for r in res] == [base + "/metrics", base + "/down", base + "/health", base + "/nope"]
    assert [r["status"] for r in res] == [200, 503, 200, 404]
    assert [r["ok"] for r in res] == [True, False, True, False]
    assert res[0]["error"] == ""
    assert P.failing(res) == [base + "/down: " + res[1]["error"], base + "/nope: " + res[3]["error"]]


def test_no_answer_has_no_status_and_says_why():
    res = P.probe_all(["http://127.0.0.1:9/health"], 2, fetch=lambda u, t: (None, "Connection refused"))
    assert res == [{"url": "http://127.0.0.1:9/health", "status": None, "ok": False, "error": "Connection refused"}]
    real = P.probe_all(["http://127.0.0.1:1/health"], 2)  # nothing listens on port 1
    assert real[0]["status"] is None and not real[0]["ok"] and real[0]["error"]


def test_the_urls_are_asked_at_once(base):
    start = time.monotonic()
    res = P.probe_all([base + "/slow"] * 6, 5)
    took = time.monotonic() - start
    assert all(r["ok"] for r in res)
    assert took < 6 * 0.5, took  # one after another would take 3 s


def test_empty_list_asks_nothing():
    assert P.probe_all([], 5, fetch=lambda u, t: pytest.fail("asked")) == []
    assert P.failing([]) == []
