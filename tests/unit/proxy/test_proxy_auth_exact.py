# -*- coding: utf-8 -*-
"""a3proxy.auth, message by message: each refusal of the secrets file pinned whole (it names the file and the key,
never a value), the warning about a file others can read, and the bearer token's parsing."""
from __future__ import annotations

import json
import os

import pytest
from a3proxy import auth

KNOWN = "api_keys, admin_token, backend_api_key"


def test_the_known_keys():
    assert auth.SECRET_KEYS == ("api_keys", "admin_token", "backend_api_key")
    assert auth.Secrets._fields == ("api_keys", "admin_token", "backend_api_key")
    assert auth.NO_SECRETS == ((), "", "")


@pytest.mark.parametrize("text, message", [
    ("[1]", "s.json must hold a JSON object with the keys " + KNOWN),
    ('"x"', "s.json must hold a JSON object with the keys " + KNOWN),
    ("{\n\n  bad", "s.json is not JSON (line 3)"),
    ('{"zeta": 1, "alpha": 2, "api_keys": []}', "s.json has unknown keys alpha, zeta (known: %s)" % KNOWN),
    ('{"api_keys": "k"}', "s.json: api_keys must be a list of non-empty strings"),
    ('{"api_keys": {"k": 1}}', "s.json: api_keys must be a list of non-empty strings"),
    ('{"api_keys": ["k", " "]}', "s.json: api_keys must be a list of non-empty strings"),
    ('{"api_keys": ["k", 2]}', "s.json: api_keys must be a list of non-empty strings"),
    ('{"admin_token": 1}', "s.json: admin_token must be a string"),
    ('{"admin_token": false}', "s.json: admin_token must be a string"),
    ('{"backend_api_key": 1.5}', "s.json: backend_api_key must be a string"),
    ('{"admin_token": " t"}', "s.json: admin_token must not carry spaces around it or line breaks"),
    ('{"admin_token": "t "}', "s.json: admin_token must not carry spaces around it or line breaks"),
    ('{"admin_token": "a\\rb"}', "s.json: admin_token must not carry spaces around it or line breaks"),
    ('{"backend_api_key": "a\\nb"}', "s.json: backend_api_key must not carry spaces around it or line breaks"),
])
def test_parse_secrets_refuses(text, message):
    with pytest.raises(ValueError) as err:
        auth.parse_secrets(text, "s.json")
    assert str(err.value) == message


def test_parse_secrets_names_the_secrets_file_by_default():
    with pytest.raises(ValueError) as err:
        auth.parse_secrets("[]")
    assert str(err.value) == "the secrets file must hold a JSON object with the keys " + KNOWN


@pytest.mark.parametrize("data, want", [
    ({"api_keys": ["a b"], "admin_token": "t-1", "backend_api_key": "b"}, (("a b",), "t-1", "b")),
    ({"admin_token": "a b"}, ((), "a b", "")),       # a space inside is fine
    ({"admin_token": None, "backend_api_key": None}, ((), "", "")),
    ({"admin_token": "", "backend_api_key": "x"}, ((), "", "x")),
    ({"api_keys": [" k "]}, ((" k ",), "", "")),     # a client key is compared as given
])
def test_parse_secrets_accepts(data, want):
    assert auth.parse_secrets(json.dumps(data), "s.json") == want
    assert auth.parse_secrets("  \n ") == ((), "", "")


@pytest.mark.parametrize("mode, warned", [(0o600, False), (0o400, False), (0o640, True), (0o604, True),
                                          (0o610, True), (0o601, True), (0o700, False)])
def test_load_secrets_warns_about_any_bit_for_others(tmp_path, mode, warned):
    path = tmp_path / "s.json"
    path.write_text('{"api_keys": ["k"]}', encoding="utf-8")
    os.chmod(path, mode)
    want = ["%s is readable by others than its owner (mode %04o): make it 0600" % (path, mode)] if warned else []
    assert auth.load_secrets(str(path)) == ((("k",), "", ""), want)


def test_load_secrets_names_the_path_in_its_errors(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"admin_token": 3}', encoding="utf-8")
    with pytest.raises(ValueError) as err:
        auth.load_secrets(str(path))
    assert str(err.value) == "%s: admin_token must be a string" % path
    path.write_text('{"admin_token": "ключ"}', encoding="utf-8")
    assert auth.load_secrets(str(path))[0] == ((), "ключ", "")


@pytest.mark.parametrize("headers, token", [
    ([(b"x-other", b"Bearer no"), (b"AUTHORIZATION", b"  Bearer   tok  ")], "tok"),
    ([(b"authorization", b"Bearer a b")], "a b"),
    ([(b"authorization", b"Bearer \xe9t\xe9")], "\xe9t\xe9"),      # latin-1, as HTTP headers are
    ([(b"authorization", b"Basic x"), (b"authorization", b"Bearer later")], None),  # the first one counts
    ([(b"authorization", b"Bearer  ")], None),
])
def test_bearer_token(headers, token):
    assert auth.bearer_token(headers) == token


def test_token_matches():
    assert auth.token_matches("b", ["a", "b"]) is True
    assert auth.token_matches("c", ["a", "b"]) is False
    assert auth.token_matches(None, ["a"]) is False
    assert auth.token_matches("a", ["b", "a", "c"]) is True  # a match before later keys stays a match


def test_unauthorized_message():
    assert auth.unauthorized_message("x") == 'missing or invalid x: send the header "Authorization: Bearer <x>"'
