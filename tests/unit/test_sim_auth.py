# -*- coding: utf-8 -*-
"""The engine simulator's API key check (sim/engine/vllm_sim/auth.py) decides as vLLM 0.18's
AuthenticationMiddleware: the keys are --api-key's or else VLLM_API_KEY's, only /v1 paths are checked, the bearer
scheme in any case. tests/sim/test_engine.py checks the same through a running engine."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "engine"))
from vllm_sim.auth import UNAUTHORIZED_BODY, api_tokens, authorized  # noqa: E402  pylint: disable=wrong-import-position


@pytest.mark.parametrize("cli, env, expected", [
    (None, None, []),                      # no key: nothing is checked
    (None, "", []),
    (None, "k-env", ["k-env"]),            # VLLM_API_KEY
    (["k-cli"], "k-env", ["k-cli"]),       # --api-key wins over the environment
    (["a", "b"], None, ["a", "b"]),        # any one of several
    ([""], "k-env", []),                   # vLLM: an empty --api-key still wins, and is dropped
])
def test_the_keys_come_from_the_flag_else_the_environment(cli, env, expected):
    assert api_tokens(cli, env) == expected


@pytest.mark.parametrize("method, path, header, ok", [
    ("POST", "/v1/completions", "Bearer s3cret", True),
    ("POST", "/v1/chat/completions", "bearer s3cret", True),     # the scheme in any case
    ("GET", "/v1/models", "BEARER s3cret", True),
    ("POST", "/v1/completions", None, False),
    ("POST", "/v1/completions", "", False),
    ("POST", "/v1/completions", "Bearer wrong", False),
    ("POST", "/v1/completions", "Bearer s3cret ", False),       # the token is everything after the first space
    ("POST", "/v1/completions", "Basic s3cret", False),
    ("POST", "/v1/completions", "s3cret", False),
    ("GET", "/v1/models?x=1", None, False),
    ("GET", "/v1/unknown", None, False),                         # before routing: 401, not 404
    ("GET", "/v1", None, False),
    ("GET", "/health", None, True),                              # outside /v1: open
    ("GET", "/metrics", None, True),
    ("GET", "/ping", None, True),
    ("GET", "/version", None, True),
    ("OPTIONS", "/v1/completions", None, True),                  # CORS preflight
])
def test_only_v1_paths_need_a_bearer_key(method, path, header, ok):
    assert authorized(method, path, header, ["s3cret"]) is ok


def test_without_keys_everything_passes_and_any_listed_key_does():
    assert authorized("POST", "/v1/completions", None, [])
    assert authorized("POST", "/v1/completions", "Bearer two", ["one", "two"])
    assert not authorized("POST", "/v1/completions", "Bearer three", ["one", "two"])


def test_the_refusal_is_vllms_compact_json():
    assert UNAUTHORIZED_BODY == b'{"error":"Unauthorized"}'
