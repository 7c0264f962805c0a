# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""What a client gets: the classification of the upstream's answers, OpenAI-style error bodies, the tail of a
cut stream, and the scrubbing of internal addresses out of every text a client reads."""

import json
import re

SSE_DONE = b"data: [DONE]"
HIDDEN = "[address hidden]"

# status -> (type, code) of the error body. The proxy's own failures keep the numeric code they always had;
# the client's mistakes use OpenAI's invalid_request_error with a word as code.
CLIENT_ERRORS = {
    400: ("BadRequestError", 400),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "unknown_url"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    500: ("InternalServerError", 500),
    502: ("BadGatewayError", 502),
    503: ("ServiceUnavailableError", 503),
    504: ("GatewayTimeoutError", 504),
}


def json_bytes(obj):
    """obj as the JSON bytes of an answer (UTF-8, non-ASCII text as it is)."""
    return json.dumps(obj, ensure_ascii=False).encode()


def error_body(message, etype, code):
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": etype, "code": code}}


def client_error(status, message):
    """The error body of an answer with this HTTP status."""
    etype, code = CLIENT_ERRORS.get(status, ("Error", status))
    return error_body(message, etype, code)


class Verdict(object):
    """What the client gets for an upstream answer: pass it on, or an error (code, message, kind).

    kind names the reason for the metrics and logs: empty_200, not_completion, upstream_error,
    upstream_status.
    """
    __slots__ = ("passed", "code", "message", "kind")

    def __init__(self, passed, code=None, message=None, kind=None):
        self.passed, self.code, self.message, self.kind = passed, code, message, kind

    def __repr__(self):
        return "Verdict(passed=%r, code=%r, kind=%r, message=%r)" % (self.passed, self.code, self.kind, self.message)


PASS = Verdict(True)


def snippet(body, limit=300):
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    body = " ".join(str(body).split())
    return body if len(body) <= limit else body[:limit] + "..."


def json_or_none(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def is_json_error(body):
    """True when body is a JSON object carrying an error ({"error": ...}, FastAPI's {"detail": ...}, or vLLM's
    older {"object": "error", "message": ...})."""
    data = json_or_none(body)
    return isinstance(data, dict) and ("error" in data or "detail" in data or data.get("object") == "error")


def error_text(data):
    if data.get("object") == "error" and "error" not in data:
        return str(data.get("message") or data)
    err = data.get("error", data.get("detail"))
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def classify_answer(status, body, failure=None):
    """Decide what a client gets for a complete upstream answer (a non-stream answer, or any non-2xx).

    status/body: what the upstream app sent (status None when it sent nothing). failure: a short text of
    the exception the upstream raised, if any.
    """
    body = body or b""
    cause = " (%s)" % failure if failure else ""
    if status is None:
        return Verdict(False, 502, "the proxy engine failed before answering%s" % cause, "upstream_error")
    if 200 <= status < 300:
        if not body.strip():
            return Verdict(False, 502, "the backends gave no answer: the proxy engine returned HTTP %d with an "
                                       "empty body (a decode backend down, or its answer unusable)%s"
                           % (status, cause), "empty_200")
        data = json_or_none(body)
        if isinstance(data, dict) and "error" in data:
            return Verdict(False, 502, "the backend reported an error: %s" % error_text(data), "upstream_error")
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            return Verdict(False, 502, "the backends' answer is not a completion (no 'choices'): %s"
                           % snippet(body), "not_completion")
        return PASS
    if 400 <= status < 500 and is_json_error(body):
        return PASS
    if failure:  # the exception says more than the upstream's generic "Internal Server Error"
        detail = failure
    else:
        detail = error_text(json_or_none(body)) if is_json_error(body) else snippet(body)
    return Verdict(False, 502, "the proxy engine answered HTTP %d%s" % (status, (": " + detail) if detail else ""),
                   "upstream_status")


def backend_error_answer(status, body):
    """(status, body) a client gets for a backend's 4xx answer to a completion, in OpenAI's error shape: the
    engine's own {"error": {...}} as it is, vLLM's older {"object": "error", "message": ...} or any other text
    rewrapped with the engine's message. A 401 or 403 is the engines refusing the proxy's own key (vllm_api_key),
    not the client's: 502 saying so."""
    data = json_or_none(body)
    if status in (401, 403):
        detail = error_text(data) if is_json_error(body) else snippet(body, 200)
        message = "the backends refused the proxy's key (HTTP %d%s): the engines' key (vllm_api_key) is not theirs" % (
            status, (": " + detail) if detail else "")
        return 502, json.dumps(client_error(502, message)).encode()
    if isinstance(data, dict) and isinstance(data.get("error"), dict) and data["error"].get("message"):
        return status, body
    if isinstance(data, dict) and is_json_error(body):
        message, etype = error_text(data), data.get("type") or CLIENT_ERRORS.get(status, ("BadRequestError",))[0]
        code, param = data.get("code", status), data.get("param")
    else:
        message, etype, code, param = snippet(body, 1000) or "HTTP %d" % status, "BadRequestError", status, None
    return status, json_bytes({"error": {"message": message, "type": etype, "param": param, "code": code}})


def sse_event(obj):
    return b"data: " + json_bytes(obj) + b"\n\n"


def sse_error_tail(message, previous=b"", status=502):
    """What closes a stream that was cut: an error event and [DONE], after whatever ends the last event."""
    if previous.endswith(b"\n\n") or not previous:
        sep = b""
    elif previous.endswith(b"\n"):
        sep = b"\n"
    else:
        sep = b"\n\n"
    return sep + sse_event(client_error(status, message)) + SSE_DONE + b"\n\n"


class DoneTracker(object):
    """Finds "data: [DONE]" in a byte stream whose chunks may split it."""

    def __init__(self):
        self.tail = b""
        self.done = False
        self.data = False

    def feed(self, chunk):
        if chunk.strip():
            self.data = True
        window = self.tail + chunk
        if SSE_DONE in window:
            self.done = True
        self.tail = window[-(len(SSE_DONE) + 4):]


async def send_bytes(send, status, body, content_type, headers=()):
    """Send a whole answer through an ASGI send."""
    hdrs = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())] + list(headers)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(send, status, obj, headers=()):
    await send_bytes(send, status, json_bytes(obj), b"application/json", headers)


# ---------------------------------------------------------------------------- internal addresses

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>)\]}]+")
_BRACKETED_V6 = re.compile(r"\[[0-9A-Fa-f:.%]+\](?::\d{1,5})?")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])")


def scrub_addresses(text, hosts=()):
    """text without internal addresses: URLs, IPv4 addresses (with a port or not), bracketed IPv6 addresses
    and each of hosts (host names and bare IPv6 addresses of the backends and etcd), with a port or not,
    become HIDDEN. For every text a client reads; the logs keep the addresses."""
    text = _URL.sub(HIDDEN, text)
    text = _BRACKETED_V6.sub(HIDDEN, text)
    text = _IPV4.sub(HIDDEN, text)
    for host in sorted({str(h) for h in hosts if h}, key=len, reverse=True):
        text = re.sub(r"(?<![\w.:-])%s(?::\d{1,5})?(?![\w:-]|\.\w)" % re.escape(host), HIDDEN, text)
    return text


def scrub_body(body, hosts=()):
    """scrub_addresses on the bytes of an answer (JSON stays JSON: HIDDEN has no quote and no backslash)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    return scrub_addresses(text, hosts).encode()


# ---------------------------------------------------------------------------- what is forwarded

def forwardable_request(body):
    """(request, body to forward, dropped) for a completion request's body: request is the parsed JSON object
    (None when the body is not one). A client-supplied kv_transfer_params is dropped (it would tell the decode
    engine which remote KV blocks to pull, from which host): the proxy engine sets its own."""
    request = json_or_none(body)
    if not isinstance(request, dict):
        return None, body, False
    if "kv_transfer_params" not in request:
        return request, body, False
    del request["kv_transfer_params"]
    return request, json_bytes(request), True
