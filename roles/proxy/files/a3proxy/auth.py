# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""Secrets and bearer tokens. The secrets come from a JSON file (--a3-secrets-file), never from the command
line; no message here or in the logs carries a secret's value."""

import collections
import hmac
import json
import os
import stat

SECRET_KEYS = ("api_keys", "admin_token", "backend_api_key")

Secrets = collections.namedtuple("Secrets", "api_keys admin_token backend_api_key")
NO_SECRETS = Secrets((), "", "")


def parse_secrets(text, source="the secrets file"):
    """Secrets from the JSON text of the secrets file: an object with the optional keys api_keys (a list of
    non-empty strings), admin_token and backend_api_key (strings; empty means unset). Raises ValueError naming
    the key that is wrong, never a value."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError("%s is not JSON (line %s)" % (source, getattr(exc, "lineno", "?")))
    if not isinstance(data, dict):
        raise ValueError("%s must hold a JSON object with the keys %s" % (source, ", ".join(SECRET_KEYS)))
    unknown = sorted(set(data) - set(SECRET_KEYS))
    if unknown:
        raise ValueError("%s has unknown keys %s (known: %s)" % (source, ", ".join(unknown), ", ".join(SECRET_KEYS)))
    keys = data.get("api_keys", [])
    if keys is None:
        keys = []
    if not isinstance(keys, list) or not all(isinstance(k, str) and k.strip() for k in keys):
        raise ValueError("%s: api_keys must be a list of non-empty strings" % source)
    for name in ("admin_token", "backend_api_key"):
        value = data.get(name, "")
        if value is not None and not isinstance(value, str):
            raise ValueError("%s: %s must be a string" % (source, name))
        if value and (value != value.strip() or any(c in value for c in "\r\n")):
            raise ValueError("%s: %s must not carry spaces around it or line breaks" % (source, name))
    return Secrets(tuple(keys), data.get("admin_token") or "", data.get("backend_api_key") or "")


def load_secrets(path):
    """(Secrets, warnings) from the secrets file; OSError or ValueError when it cannot be read or is wrong."""
    info = os.stat(path)
    warnings = []
    if stat.S_IMODE(info.st_mode) & 0o077:
        warnings.append("%s is readable by others than its owner (mode %04o): make it 0600"
                        % (path, stat.S_IMODE(info.st_mode)))
    with open(path, encoding="utf-8") as handle:
        return parse_secrets(handle.read(), path), warnings


def bearer_token(headers):
    """The token of an "Authorization: Bearer <token>" header among ASGI headers ([(name, value)] bytes, names
    in lower case), or None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _sep, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def token_matches(token, allowed):
    """True when token equals one of allowed, compared in constant time (every key is compared, whatever
    matched before)."""
    if token is None:
        return False
    given = token.encode("utf-8")
    found = False
    for key in allowed:
        found |= hmac.compare_digest(given, key.encode("utf-8"))
    return found


def unauthorized_message(what):
    return "missing or invalid %s: send the header \"Authorization: Bearer <%s>\"" % (what, what)
