# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The answers haproxy writes itself as the edge of proxy_engine vllm-router (roles/proxy/templates/haproxy.cfg.j2):
OpenAI-style JSON error bodies, the same shape the wrapper writes (a3proxy/answers.py), and the errorfiles of
haproxy's own errors (whole HTTP answers). Standard library only, no I/O."""
from __future__ import annotations

import json

# The reason phrase of every status the edge answers with (haproxy writes its errorfiles verbatim).
REASONS = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           411: "Length Required", 413: "Payload Too Large", 500: "Internal Server Error", 502: "Bad Gateway",
           503: "Service Unavailable", 504: "Gateway Timeout"}


def _entry(status, entry):
    try:
        etype, code, message = entry
    except (TypeError, ValueError):
        raise ValueError("the edge answer of HTTP %s must be [type, code, message], not %r" % (status, entry))
    return str(etype), code, " ".join(str(message).split())


def error_json(etype, code, message) -> str:
    """The compact JSON error body. haproxy takes it inside single quotes, where nothing is escaped: a single
    quote in it is refused rather than written into a configuration that would not load."""
    try:
        code = int(code)
    except (TypeError, ValueError):
        code = str(code)
    body = json.dumps({"error": {"message": message, "type": etype, "code": code}}, ensure_ascii=True,
                      separators=(", ", ": "))
    if "'" in body:
        raise ValueError("the edge's error message %r holds a single quote, which haproxy's quoting cannot carry: "
                         "reword it" % message)
    return body


def edge_answers(messages) -> dict:
    """{status: [type, code, message]} -> {"status": JSON body}, for the config's `string '...'` answers."""
    return dict((str(int(status)), error_json(*_entry(status, entry))) for status, entry in messages.items())


def edge_errorfiles(messages, codes, retry_after, directory) -> list:
    """The errorfiles of haproxy's own errors, as files entries ({content, dest, mode}) under directory/errors:
    the status line, JSON content type, the body's length, no caching, connection close, and Retry-After on 503
    (the same bound the wrapper sends)."""
    out = []
    for status in codes:
        status = int(status)
        entry = messages.get(status, messages.get(str(status)))
        if entry is None:
            raise ValueError("HTTP %d has an errorfile but no message in proxy_edge_messages: add one" % status)
        body = error_json(*_entry(status, entry))
        headers = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "Error")), "content-type: application/json",
                   "content-length: %d" % len(body.encode()), "cache-control: no-cache", "connection: close"]
        if status == 503:
            headers.append("retry-after: %d" % int(retry_after))
        out.append({"content": "\r\n".join(headers) + "\r\n\r\n" + body,
                    "dest": "%s/errors/%d.http" % (str(directory).rstrip("/"), status), "mode": "0644"})
    return out
