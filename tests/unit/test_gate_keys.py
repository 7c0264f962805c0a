# -*- coding: utf-8 -*-
"""The gate (roles/gate) carries the keys: the proxy's client key (the first of proxy_api_keys) on requests through
the proxy, the engines' key (vllm_api_key, as vllm_api_headers) on requests to an engine's /v1 routes; every task
that carries one is no_log while the key is set, and the header values are what the proxy and vLLM expect."""
from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "gate"
COMMON = Path(__file__).resolve().parents[2] / "roles" / "common" / "defaults" / "main.yml"


def _tasks(data):
    for task in data or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def _uri_tasks():
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            args = task.get("ansible.builtin.uri")
            if isinstance(args, dict):
                yield path.name, task, args


def test_every_v1_request_carries_its_key_and_hides_it():
    seen = {"proxy": 0, "engine": 0}
    for name, task, args in _uri_tasks():
        url = str(args.get("url", ""))
        if "/v1/" not in url:
            # /health and /metrics need no key (vLLM guards /v1 only): such a task must not carry one either
            assert "headers" not in args or "api" not in str(args["headers"]), (name, task["name"])
            continue
        kind, header_var, key_var = (("proxy", "gate_proxy_headers", "proxy_api_keys")
                                     if "gate_proxy_url" in url or "gate_vip_url" in url
                                     else ("engine", "vllm_api_headers", "vllm_api_key"))
        seen[kind] += 1
        assert header_var in str(args.get("headers", "")), (name, task["name"], "no %s" % header_var)
        assert task.get("no_log") == "{{ %s | length > 0 }}" % key_var, (name, task["name"], task.get("no_log"))
    assert seen == {"proxy": 3, "engine": 1}, seen   # the proxy's: its own address twice, proxy_vip once


@pytest.mark.parametrize("keys, expected", [
    ([], {}),
    (["first-key", "second-key"], {"Authorization": "Bearer first-key"}),
])
def test_the_proxy_header_is_the_first_client_key(keys, expected):
    source = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["gate_proxy_headers"]
    env = jinja2.Environment()
    assert env.from_string(source.replace("{{", "{{ (").replace("}}", ") | tojson }}")).render(
        proxy_api_keys=keys) == jinja2.Environment().from_string("{{ x | tojson }}").render(x=expected)


@pytest.mark.parametrize("key, expected", [("", {}), ("k3y", {"Authorization": "Bearer k3y"})])
def test_the_engine_header_carries_vllm_api_key(key, expected):
    source = yaml.safe_load(COMMON.read_text(encoding="utf-8"))["vllm_api_headers"]
    rendered = jinja2.Environment().from_string(source.replace("{{", "{{ (").replace("}}", ") | tojson }}")).render(
        vllm_api_key=key)
    assert rendered == jinja2.Environment().from_string("{{ x | tojson }}").render(x=expected)


def test_failure_messages_never_print_a_header():
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            text = str((task.get("ansible.builtin.assert") or {}).get("fail_msg", "")) + str(
                (task.get("ansible.builtin.fail") or {}).get("msg", ""))
            for word in ("headers", "api_key", "Authorization", "invocation"):
                assert word not in text, (path.name, task["name"], word)
