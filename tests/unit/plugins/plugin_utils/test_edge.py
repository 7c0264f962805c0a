# -*- coding: utf-8 -*-
"""The answers of the haproxy edge (proxy_engine vllm-router): JSON bodies and errorfiles."""
import json

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _edge as E

MESSAGES = {404: ["invalid_request_error", "unknown_url", "unknown  path:\n  see the docs"],
            503: ["ServiceUnavailableError", 503, "no backend; retry later"],
            504: ["GatewayTimeoutError", "504", "too slow"]}


def test_the_bodies_are_openai_errors_keyed_by_status_text():
    got = E.edge_answers(MESSAGES)
    assert sorted(got) == ["404", "503", "504"]
    assert json.loads(got["404"]) == {"error": {"message": "unknown path: see the docs", "type": "invalid_request_error",
                                                "code": "unknown_url"}}
    # a numeric code stays a number, as the wrapper writes it
    assert json.loads(got["503"])["error"]["code"] == 503 and json.loads(got["504"])["error"]["code"] == 504
    # one line: haproxy's `string '...'` argument
    assert all("\n" not in body for body in got.values())


def test_non_ascii_is_escaped_and_a_single_quote_is_refused():
    assert E.error_json("t", 1, "caf\u00e9") == '{"error": {"message": "caf\\u00e9", "type": "t", "code": 1}}'
    with pytest.raises(ValueError, match="single quote"):
        E.edge_answers({400: ["t", 400, "the client's body"]})
    with pytest.raises(ValueError, match=r"\[type, code, message\]"):
        E.edge_answers({400: ["t", 400]})


def test_the_errorfiles_are_whole_http_answers():
    files = E.edge_errorfiles(MESSAGES, [503, "504"], 7, "/w/edge/")
    assert [f["dest"] for f in files] == ["/w/edge/errors/503.http", "/w/edge/errors/504.http"]
    assert {f["mode"] for f in files} == {"0644"}
    head, body = files[0]["content"].split("\r\n\r\n", 1)
    lines = head.split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable"
    assert "content-type: application/json" in lines and "connection: close" in lines
    assert "content-length: %d" % len(body.encode()) in lines
    assert "retry-after: 7" in lines
    assert json.loads(body)["error"]["message"] == "no backend; retry later"
    head504 = files[1]["content"].split("\r\n\r\n", 1)[0].split("\r\n")
    assert head504[0] == "HTTP/1.1 504 Gateway Timeout"
    assert not [line for line in head504 if line.startswith("retry-after")]


def test_an_errorfile_without_a_message_is_refused():
    with pytest.raises(ValueError, match="HTTP 502 has an errorfile but no message"):
        E.edge_errorfiles(MESSAGES, [502], 1, "/w")
