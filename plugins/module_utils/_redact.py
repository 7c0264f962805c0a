# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction of secrets in what the support bundle collects (module support_bundle).

Everything a node gives the support bundle (journals, the engines' log, rendered scripts and units, tool
answers) passes through ``redact_bytes`` on the node, before it leaves, and again on the controller before the
archive is written. It replaces with ``[REDACTED]``:

- the literal values the play knows to be secret (vllm_api_key, proxy_admin_token, proxy_api_keys, ...);
- PEM private key blocks (a block cut by a log tail too: a BEGIN line without its END, an END without its BEGIN);
- the value of an ``Authorization:`` header, and a ``Bearer <token>`` anywhere;
- the value of a command line flag named like a secret (``--api-key X``, ``--token=X``, ``--password X``) and the
  password of ``--user name:password``;
- the value of an environment assignment named like a secret (``VLLM_API_KEY=...``, ``*_TOKEN=``,
  ``*_PASSWORD=``, ``*_SECRET=``, ``*_PRIVATE_KEY=``);
- the value of a key named like a secret in JSON, Python reprs, YAML and ``key=value`` text (``"admin_token":
  "..."``, ``"api_keys": [...]``, ``password=...``);
- the password of a URL (``scheme://user:password@host``).

A value that is empty, already ``[REDACTED]`` or a shell expansion (``$VAR``, ``"$(cat file)"``) is kept: the
scripts read their secrets from files at run time and say so. Redacting is idempotent (redacting twice gives the
same bytes as once) and works on bytes, so bytes that are not UTF-8 pass through unchanged. Nothing here imports
Ansible, so plain pytest tests it.
"""
from __future__ import annotations

import fnmatch
import os
import re

MARK = b"[REDACTED]"
# Shorter literal values are not replaced wherever they occur (a 1-3 character "secret" would wreck every file);
# the patterns still catch them where they are used as a secret.
MIN_LITERAL = 4

# File names never read, whatever directory they are in: the deployment's key files (vllm_api_key, the proxy's
# secrets file, etcd's and the CURVE keys) and anything named like one.
SECRET_FILE_PATTERNS = ("*.key", "*.key_secret", "*secret*", "*api_key*", "*apikey*", "*password*", "*passwd*",
                        "*token*", "*.pem", "*.p12", "*.pfx", "id_rsa*", "id_ecdsa*", "id_ed25519*")

_SP = rb"[ \t]"
# A value: a quoted string (double quotes with escapes, or single quotes) or a run of characters that end a value
# nowhere in a command line, an environment file, a URL query or a log line.
_VALUE = rb"(?:\"(?:[^\"\\\r\n]|\\.)*\"|'[^'\r\n]*'|\[REDACTED\]|[^\s\"',;&<>(){}\[\]]+)"
# A YAML value: quoted, or the rest of the line (a plain scalar may hold spaces).
_YAML_VALUE = rb"(?:\"(?:[^\"\\\r\n]|\\.)*\"|'[^'\r\n]*'|\[REDACTED\]|[^\s\"'#|>!{\[&*][^\r\n]*)"
# A list of values on one line (its quoted items may hold brackets: the mark does).
_LIST = rb"\[(?:\"(?:[^\"\\\r\n]|\\.)*\"|'[^'\r\n]*'|[^\]\r\n\"'])*\]"
# Names of secret keys (lower or upper case, with any prefix ending in _ or -): api_key(s), apikey, token,
# password, passwd, secret, private_key, key_secret, secret_key, access_key, credential(s), auth_token.
_NAME = (rb"(?:[A-Za-z0-9_.-]*[_.-])?(?:api[_-]?keys?|apikey|token|password|passwd|secret|private[_-]key|"
         rb"key[_-]secret|secret[_-]key|access[_-]key|credentials?)")
# The same in an environment's upper case: VLLM_API_KEY, HF_TOKEN, ETCDCTL_PASSWORD, AWS_SECRET, ...
_UPPER_NAME = (rb"(?:[A-Z0-9_]*_)?(?:TOKEN|PASSWORD|PASSWD|SECRET|API_KEY|APIKEY|PRIVATE_KEY|KEY_SECRET|SECRET_KEY|"
               rb"ACCESS_KEY|CREDENTIALS)")
_PEM_LABEL = rb"(?P<label>[A-Z0-9]+(?: [A-Z0-9]+)* )?"
_PEM_BODY = rb"(?:[A-Za-z0-9+/=]+|[A-Za-z-]+:[^\r\n]*|\[REDACTED\])"

_PEM_BLOCK = re.compile(rb"(?P<pre>-----BEGIN " + _PEM_LABEL + rb"PRIVATE KEY-----)(?P<val>.*?)"
                        rb"(?P<post>-----END (?P=label)?PRIVATE KEY-----)", re.S)
_PEM_OPEN = re.compile(rb"(?P<pre>-----BEGIN " + _PEM_LABEL + rb"PRIVATE KEY-----)(?P<val>(?:\r?\n" + _PEM_BODY
                       + rb")+)")
# Before an END whose BEGIN was cut off: full base64 lines (a PEM line is 64 characters; 16 or more here) and the
# last, possibly short, one; not a short line of ordinary text further up.
_PEM_LONG = rb"(?:[A-Za-z0-9+/]{16,}={0,2}|\[REDACTED\])"
_PEM_CLOSE = re.compile(rb"(?m)(?P<val>(?:^" + _PEM_LONG + rb"\r?\n)*^(?:" + _PEM_LONG + rb"|[A-Za-z0-9+/]+={0,2})\r?\n)"
                        rb"(?P<post>-----END " + _PEM_LABEL + rb"PRIVATE KEY-----)")

# (name, pattern with the groups pre (kept) and val (replaced)); applied in this order after the PEM blocks.
RULES = (
    ("authorization header", re.compile(
        rb"(?i)(?P<pre>\bauthorization[\"']?" + _SP + rb"*[:=]" + _SP + rb"*[\"']?" + _SP
        + rb"*(?:(?:bearer|basic|token|digest)" + _SP + rb"+)?)(?P<val>[^\s\"',;]+)")),
    ("bearer token", re.compile(rb"(?P<pre>\bBearer" + _SP + rb"+)(?P<val>[A-Za-z0-9._~+/=-]{6,}|\[REDACTED\])")),
    ("secret flag", re.compile(
        rb"(?i)(?P<pre>(?<![\w-])--[A-Za-z0-9_-]*(?:api[_-]?keys?|apikey|token|password|passwd|secret|"
        rb"private[_-]key)(?:=|" + _SP + rb"+))(?P<val>" + _VALUE + rb")")),
    ("user password flag", re.compile(rb"(?P<pre>(?<![\w-])--user(?:=|" + _SP + rb"+)[^\s:\"']+:)(?P<val>[^\s\"']+)")),
    ("secret assignment", re.compile(
        rb"(?P<pre>(?<![\w.-])" + _UPPER_NAME + _SP + rb"*=" + _SP + rb"*)(?P<val>" + _VALUE + rb")")),
    ("secret key (quoted)", re.compile(
        rb"(?i)(?P<pre>(?P<q>[\"'])" + _NAME + rb"(?P=q)" + _SP + rb"*[:=]" + _SP + rb"*)(?P<val>" + _LIST
        + rb"|\"(?:[^\"\\\r\n]|\\.)*\"|'[^'\r\n]*')")),
    ("secret key=value", re.compile(
        rb"(?i)(?P<pre>(?<![\w.-])" + _NAME + _SP + rb"*=" + _SP + rb"*)(?P<val>" + _VALUE + rb")")),
    # YAML keys are snake_case (or an environment's upper case): "Token: ..." at a line's start is prose
    ("secret key (YAML)", re.compile(
        rb"(?m)(?P<pre>^" + _SP + rb"*(?:-" + _SP + rb"+)?(?:" + _NAME + rb"|" + _UPPER_NAME + rb")" + _SP + rb"*:" + _SP
        + rb"+)(?P<val>" + _YAML_VALUE + rb")")),
    ("URL password", re.compile(rb"(?P<pre>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"']+:)(?P<val>[^\s@/\"']+)(?=@)")),
)


def _to_bytes(value):
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")


def _masked(val):
    """What replaces one value: the mark, inside the value's own quotes or list brackets; None to keep the value
    (empty, already redacted, or a shell expansion that names where the secret is read from)."""
    inner = val
    if val[:1] in (b'"', b"'") and val[-1:] == val[:1] and len(val) >= 2:
        inner = val[1:-1]
        if not inner.strip() or inner == MARK or inner.startswith(b"$"):
            return None
        return val[:1] + MARK + val[:1]
    if val[:1] == b"[" and val[-1:] == b"]" and val != MARK:
        if not val[1:-1].strip():
            return None
        return b'["' + MARK + b'"]'
    if not inner.strip() or inner == MARK or inner.startswith(b"$"):
        return None
    return MARK


def literal_secrets(secrets):
    """The literal values worth replacing wherever they occur, as bytes, longest first: non-empty, at least
    MIN_LITERAL long, and not part of the mark itself (replacing those would not be idempotent)."""
    out = set()
    for secret in secrets or ():
        if secret is None:
            continue
        value = _to_bytes(secret)
        if len(value.strip()) >= MIN_LITERAL and value not in MARK:
            out.add(value)
    return sorted(out, key=lambda v: (-len(v), v))


def _pem(data, counts):
    """Private key blocks: whole ones, then a BEGIN whose END was cut off, then an END whose BEGIN was."""
    def whole(m):
        body = m.group("val")
        sep = b"\\n" if b"\n" not in body and b"\\n" in body else b"\n"
        new = sep + MARK + sep
        if body != new:
            counts["pem private key"] = counts.get("pem private key", 0) + 1
        return m.group("pre") + new + m.group("post")

    def opened(m):
        new = b"\n" + MARK
        if m.group("val") != new:
            counts["pem private key"] = counts.get("pem private key", 0) + 1
        return m.group("pre") + new

    def closed(m):
        new = MARK + b"\n"
        if m.group("val") != new:
            counts["pem private key"] = counts.get("pem private key", 0) + 1
        return new + m.group("post")

    data = _PEM_BLOCK.sub(whole, data)
    data = _PEM_OPEN.sub(opened, data)
    return _PEM_CLOSE.sub(closed, data)


def redact_bytes(data, secrets=(), counts=None):
    """``data`` (bytes or str) with every secret replaced by ``[REDACTED]``, as bytes.

    ``secrets``: literal values to replace wherever they occur (see ``literal_secrets``). ``counts``, when a dict,
    is updated with the number of values replaced per rule (a value that was already the mark is not counted).
    """
    data = _to_bytes(data)
    counts = {} if counts is None else counts
    if b"PRIVATE KEY-----" in data:
        data = _pem(data, counts)
    for value in literal_secrets(secrets):
        found = data.count(value)
        if found:
            data = data.replace(value, MARK)
            counts["literal value"] = counts.get("literal value", 0) + found
    for name, pattern in RULES:
        def replace(m, name=name):
            new = _masked(m.group("val"))
            if new is None or new == m.group("val"):
                return m.group(0)
            counts[name] = counts.get(name, 0) + 1
            return m.group("pre") + new
        data = pattern.sub(replace, data)
    return data


def redact_text(text, secrets=(), counts=None):
    """``text`` (str) with every secret replaced; bytes that were not UTF-8 (surrogate escapes) stay as they were."""
    return redact_bytes(text, secrets, counts).decode("utf-8", "surrogateescape")


def redactions(counts):
    """The total of a ``counts`` dict of ``redact_bytes``."""
    return sum((counts or {}).values())


def is_secret_path(path, patterns=()):
    """Whether a file must never be collected: its name matches SECRET_FILE_PATTERNS (case-insensitive), or the
    whole path matches one of ``patterns`` (globs of the files the play names as secret, e.g. the proxy's secrets
    file, a directory of private keys ``/dir/*``)."""
    name = os.path.basename(str(path)).lower()
    if any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILE_PATTERNS):
        return True
    normal = os.path.normpath(str(path))
    for pattern in patterns or ():
        pattern = str(pattern)
        # "/dir/*" covers everything under /dir: fnmatch's * matches "/" too
        if fnmatch.fnmatchcase(normal, os.path.normpath(pattern)) or normal == os.path.normpath(pattern):
            return True
    return False
