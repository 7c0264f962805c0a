# -*- coding: utf-8 -*-
"""a3proxy.auth: the secrets file and bearer tokens."""
from __future__ import annotations

import json
import os

import pytest
from a3proxy import auth


def test_parse_secrets():
    text = json.dumps({"api_keys": ["k1", "k2"], "admin_token": "t", "backend_api_key": "b"})
    assert auth.parse_secrets(text) == auth.Secrets(("k1", "k2"), "t", "b")
    assert auth.parse_secrets("{}") == auth.NO_SECRETS == auth.Secrets((), "", "")
    assert auth.parse_secrets("") == auth.NO_SECRETS
    assert auth.parse_secrets('{"api_keys": null, "admin_token": null, "backend_api_key": ""}') == auth.NO_SECRETS


@pytest.mark.parametrize("data, text", [
    ("[]", "must hold a JSON object"),
    ("{not json", "is not JSON"),
    ({"api_keys": "k1"}, "api_keys must be a list of non-empty strings"),
    ({"api_keys": ["k1", ""]}, "api_keys must be a list of non-empty strings"),
    ({"api_keys": [1]}, "api_keys must be a list of non-empty strings"),
    ({"admin_token": 5}, "admin_token must be a string"),
    ({"backend_api_key": ["b"]}, "backend_api_key must be a string"),
    ({"backend_api_key": "b-secret\n"}, "backend_api_key must not carry spaces"),
    ({"admin_tokn": "t-secret"}, "unknown keys admin_tokn"),
])
def test_parse_secrets_names_the_key_never_the_value(data, text):
    with pytest.raises(ValueError, match=text) as err:
        auth.parse_secrets(data if isinstance(data, str) else json.dumps(data), "s.json")
    assert "secret" not in str(err.value) and "k1" not in str(err.value) and "s.json" in str(err.value)


def test_load_secrets_warns_about_a_readable_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"admin_token": "t"}')
    os.chmod(path, 0o600)
    assert auth.load_secrets(str(path)) == (auth.Secrets((), "t", ""), [])
    os.chmod(path, 0o644)
    secrets, warnings = auth.load_secrets(str(path))
    assert secrets.admin_token == "t" and len(warnings) == 1 and "0644" in warnings[0] and "0600" in warnings[0]
    with pytest.raises(OSError):
        auth.load_secrets(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("headers, token", [
    ([(b"authorization", b"Bearer abc")], "abc"),
    ([(b"authorization", b"bearer  abc ")], "abc"),
    ([(b"Authorization", b"BEARER abc")], "abc"),
    ([(b"authorization", b"Basic abc")], None),
    ([(b"authorization", b"Bearer")], None),
    ([(b"authorization", b"Bearer ")], None),
    ([(b"authorization", b"abc")], None),
    ([(b"x-api-key", b"abc")], None),
    ([], None),
])
def test_bearer_token(headers, token):
    assert auth.bearer_token(headers) == token


def test_token_matches_every_key_in_constant_time(monkeypatch):
    assert auth.token_matches("k2", ["k1", "k2", "k3"])
    assert not auth.token_matches("k", ["k1", "k2"]) and not auth.token_matches("k22", ["k2"])
    assert not auth.token_matches(None, ["k1"]) and not auth.token_matches("", ["k1"])
    assert not auth.token_matches("k1", [])
    assert auth.token_matches("ключ", ["ключ"])
    compared = []
    real = auth.hmac.compare_digest
    monkeypatch.setattr(auth.hmac, "compare_digest", lambda a, b: compared.append(b) or real(a, b))
    assert auth.token_matches("k1", ["k1", "k2", "k3"])
    assert compared == [b"k1", b"k2", b"k3"]  # no early exit on a match: every key is compared


def test_unauthorized_message_names_the_header_not_a_key():
    assert auth.unauthorized_message("API key") == \
        'missing or invalid API key: send the header "Authorization: Bearer <API key>"'
