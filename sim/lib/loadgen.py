#!/usr/bin/env python3
"""A small, bounded load generator for fault tests under load (Python 3.11 standard library only).

N client threads send chat completions one after another to an OpenAI-compatible endpoint on a
loopback address (the simulated cluster's proxy), alternating `stream: false` and `stream: true`,
and record one `Outcome` per request. A fault test starts the load, injects a fault, heals it,
stops the load and calls `summarize()`; `format_table()` renders several summaries as markdown.

    load = Load("http://127.30.0.11:8088", "glm-5.1")
    load.start()
    ...                                   # inject the fault
    fault_at = time.time()                # wall clock: fault times are epoch seconds
    ...                                   # heal, wait
    outcomes = load.stop()
    print(format_table([summarize(outcomes, fault_at, name="decode down")]))

Every request gets one class (`Outcome.kind`):
  good          200 and (non-stream) JSON with non-empty choices[0].message.content (or .text) and
                usage.completion_tokens > 0; (stream) at least one content delta, no error event and
                `data: [DONE]` at the end
  honest_error  status >= 400 with a JSON body carrying "error" (Outcome.retry_after tells whether a
                Retry-After header came with it), or a stream with an SSE error event
  empty_200     200 with an empty body, or a 200 without content (JSON without choices/content, a
                stream with neither content nor an error event)
  conn_error    connection refused, reset or closed before any status line (e.g. a restarting proxy),
                or closed before the body ended (a chunked body without its last chunk, fewer bytes
                than content-length: the process that answered died, e.g. the proxy killed mid-answer;
                the client can tell the answer is incomplete)
  timeout       no complete answer within the per-request timeout (a hang)
  bad           anything else (200 with garbage, 5xx without a JSON error body, a stream that ends
                properly but without `data: [DONE]`, ...); Outcome.detail says what

The load always ends by itself: after `max_duration` seconds (plus at most one request timeout) or
`max_requests` requests, whichever comes first, unless `stop()` ends it earlier. Only loopback targets
(127.0.0.0/8 or `localhost`) are accepted; proxies from the environment and redirects are not used.

Command line (for a suite that runs the load as a separate process; outcomes as JSON lines):
    loadgen.py run --base URL --model NAME [--clients 3] [--timeout 30] [--max-tokens 8]
                   [--duration 600] [--max-requests 20000] [--out FILE]     (ends on SIGTERM/SIGINT)
    loadgen.py table --outcomes FILE --fault NAME=EPOCH [--fault NAME=EPOCH ...]
The table command gives each fault the outcomes that started between its time and the next fault's.
"""

import argparse
import functools
import http.client
import ipaddress
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from typing import Optional

GOOD, HONEST_ERROR, EMPTY_200, CONN_ERROR, TIMEOUT, BAD = (
    "good", "honest_error", "empty_200", "conn_error", "timeout", "bad")
KINDS = (GOOD, HONEST_ERROR, EMPTY_200, CONN_ERROR, TIMEOUT, BAD)

DETAIL_MAX = 200


# --------------------------------------------------------------------------- outcome

@dataclass
class Outcome:
    """One request. Times: `*_wall` are epoch seconds (time.time()), `*_mono` time.monotonic()."""
    client: int
    seq: int
    stream: bool
    start_wall: float
    start_mono: float
    end_wall: float = 0.0
    end_mono: float = 0.0
    status: Optional[int] = None
    kind: str = BAD
    retry_after: bool = False
    completion_tokens: Optional[int] = None
    detail: str = ""

    @property
    def elapsed(self):
        return self.end_mono - self.start_mono

    def as_dict(self):
        return asdict(self)


def _short(data):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    data = str(data)
    return data if len(data) <= DETAIL_MAX else data[:DETAIL_MAX] + "..."


# --------------------------------------------------------------------------- target check

def check_loopback_url(base_url):
    """Return the base URL without a trailing slash; ValueError unless it is http:// on a loopback host."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme != "http":
        raise ValueError(f"loadgen: only http:// URLs are supported, got {base_url!r}")
    host = parts.hostname or ""
    if host != "localhost":
        try:
            addr = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"loadgen: host {host!r} of {base_url!r} is neither an IPv4 loopback address "
                             "(127.0.0.0/8) nor localhost") from None
        if addr.version != 4 or addr not in ipaddress.ip_network("127.0.0.0/8"):
            raise ValueError(f"loadgen: refusing non-loopback target {host} ({base_url!r}); only 127.0.0.0/8 "
                             "and localhost are allowed")
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as e:
        raise ValueError(f"loadgen: bad port in {base_url!r}: {e}") from None
    return base_url.rstrip("/")


# --------------------------------------------------------------------------- HTTP plumbing

class _TrackedConnection(http.client.HTTPConnection):
    """Reports its socket once connected, so the request deadline can be applied to every read and
    `Load.stop(abort=True)` can cut a request that is in flight."""

    def __init__(self, *args, on_connect=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._on_connect = on_connect

    def connect(self):
        super().connect()
        if self._on_connect is not None:
            self._on_connect(self.sock)


class _TrackingHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, on_connect):
        super().__init__()
        self._conn_class = functools.partial(_TrackedConnection, on_connect=on_connect)

    def http_open(self, req):
        return self.do_open(self._conn_class, req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect (it could lead off loopback): a 3xx is returned as an HTTPError."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def build_opener(on_connect=None):
    """An opener with no proxies (empty ProxyHandler), no redirects, and socket tracking."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect(),
                                       _TrackingHTTPHandler(on_connect))


class _Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
        self.sock = None

    def remaining(self):
        return self.end - time.monotonic()

    def arm(self):
        """Before a read: limit the socket to the time left; TimeoutError when none is left."""
        left = self.remaining()
        if left <= 0:
            raise TimeoutError("per-request timeout")
        if self.sock is not None:
            try:
                self.sock.settimeout(left)
            except OSError:
                pass


class _Cut(Exception):
    """The body ended abnormally (connection reset or incomplete chunked body) after the status."""


def _read_chunks(resp, deadline):
    """The body's pieces as they come; _Cut when the connection ends before the body does.

    read1, not readline: http.client's readline takes a chunked body that stops between two chunks
    (the server killed) for a normal end, because its peek drops the IncompleteRead and closes."""
    count = 0
    while True:
        deadline.arm()
        try:
            data = resp.read1(65536)
        except (http.client.IncompleteRead, ConnectionError) as e:
            raise _Cut(f"the connection ended mid-body after {count} bytes ({type(e).__name__})") from e
        if not data:
            short = getattr(resp, "length", None)  # bytes of content-length still missing
            if short:
                raise _Cut(f"the connection ended mid-body after {count} bytes ({short} short of content-length)")
            return
        count += len(data)
        yield data


def _read_body(resp, deadline):
    return b"".join(_read_chunks(resp, deadline))


def _read_lines(resp, deadline):
    """The body's lines, each with its newline (the last one may lack it)."""
    rest = b""
    for data in _read_chunks(resp, deadline):
        rest += data
        *lines, rest = rest.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


# --------------------------------------------------------------------------- classification

def _choice_text(choice, stream):
    if not isinstance(choice, dict):
        return ""
    if stream:
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        msg = choice.get("message")
        text = msg.get("content") if isinstance(msg, dict) else None
    if not text:
        text = choice.get("text")
    return text if isinstance(text, str) else ""


def classify_json(status, body, has_retry_after=False):
    """(kind, detail, completion_tokens, retry_after) for a complete non-stream answer."""
    if status >= 400:
        try:
            obj = json.loads(body)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "error" in obj:
            return HONEST_ERROR, _short(json.dumps(obj["error"])), None, bool(has_retry_after)
        return BAD, _short(f"{status} without a JSON error body: {_short(body)}"), None, bool(has_retry_after)
    if status != 200:
        return BAD, _short(f"unexpected status {status}: {_short(body)}"), None, False
    if not body.strip():
        return EMPTY_200, "200 with an empty body", None, False
    try:
        obj = json.loads(body)
    except ValueError:
        return BAD, _short(f"200 with a non-JSON body: {_short(body)}"), None, False
    if not isinstance(obj, dict):
        return BAD, _short(f"200 with a JSON {type(obj).__name__}: {_short(body)}"), None, False
    if "error" in obj and not obj.get("choices"):
        return BAD, _short(f"200 carrying an error object: {json.dumps(obj['error'])}"), None, False
    choices = obj.get("choices")
    text = _choice_text(choices[0], False) if isinstance(choices, list) and choices else ""
    if not text:
        return EMPTY_200, _short(f"200 without content: {_short(body)}"), None, False
    usage = obj.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        return BAD, _short(f"content without usage.completion_tokens > 0 (usage={usage!r})"), None, False
    return GOOD, "", tokens, False


class StreamState:
    """Accumulates what an SSE answer said, line by line."""

    def __init__(self):
        self.content = 0          # events with non-empty content
        self.error = None         # the first error event (text)
        self.done = False         # saw `data: [DONE]`
        self.garbage = None       # the first line that is neither SSE nor JSON data
        self.completion_tokens = None
        self.bytes = 0

    def feed(self, raw_line):
        self.bytes += len(raw_line)
        line = raw_line.decode("utf-8", "replace").rstrip("\r\n")
        if not line or line.startswith(":"):
            return
        if line.startswith("event:"):
            if line[6:].strip() == "error" and self.error is None:
                self.error = "event: error"
            return
        if line.startswith(("id:", "retry:")):
            return
        if not line.startswith("data:"):
            if self.garbage is None:
                self.garbage = line
            return
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            if self.garbage is None:
                self.garbage = line
            return
        if not isinstance(obj, dict):
            if self.garbage is None:
                self.garbage = line
            return
        if "error" in obj:
            if self.error is None or self.error == "event: error":
                self.error = json.dumps(obj["error"])
            return
        for choice in obj.get("choices") or []:
            if _choice_text(choice, True):
                self.content += 1
                break
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.completion_tokens = usage["completion_tokens"]

    def classify(self):
        """(kind, detail) once the stream ended as HTTP says a body ends (not cut)."""
        if self.error is not None:
            return HONEST_ERROR, _short(f"stream error event: {self.error}")
        if self.garbage is not None:
            return BAD, _short(f"stream with a non-SSE line: {self.garbage}")
        if self.content == 0:
            return EMPTY_200, _short(f"200 stream without content or error event, {self.bytes} bytes")
        if not self.done:
            return BAD, f"stream ended without data: [DONE] after {self.content} content events"
        return GOOD, ""


# --------------------------------------------------------------------------- load

class Load:
    """N client threads sending chat completions one after another until stop() or a bound.

    base_url      proxy URL on a loopback address (ValueError otherwise), e.g. http://127.30.0.11:8088
    model         the `model` of each request
    clients       number of client threads
    timeout       per-request timeout (s): no complete answer in this time = `timeout`
    max_tokens    `max_tokens` of each request
    max_duration  no request starts later than this many seconds after start()
    max_requests  no more requests than this, all clients together
    interval      minimum seconds between the starts of one client's requests (keeps a failing
                  target, e.g. a refused port, from being hammered)
    on_outcome    optional callable(Outcome), called in the client thread after each request
    api_key       the proxy's client key, sent as "Authorization: Bearer <key>" (default: $A3_PROXY_API_KEY, none
                  when unset or empty)
    """

    def __init__(self, base_url, model, clients=3, timeout=30.0, max_tokens=8, max_duration=600.0,
                 max_requests=20000, interval=0.1, prompt="Say hello to the load test", on_outcome=None,
                 api_key=None):
        self.base_url = check_loopback_url(base_url)
        self.url = self.base_url + "/v1/chat/completions"
        if clients < 1 or timeout <= 0 or max_duration <= 0 or max_requests < 1 or max_tokens < 1:
            raise ValueError("loadgen: clients, timeout, max_duration, max_requests and max_tokens must be positive")
        self.model = model
        self.clients = int(clients)
        self.timeout = float(timeout)
        self.max_tokens = int(max_tokens)
        self.max_duration = float(max_duration)
        self.max_requests = int(max_requests)
        self.interval = max(0.0, float(interval))
        self.prompt = prompt
        self.on_outcome = on_outcome
        self.api_key = api_key if api_key is not None else os.environ.get("A3_PROXY_API_KEY", "")
        self.aborted = 0                 # requests cut by stop(abort=True); not in outcomes
        self.started_wall = None
        self._outcomes = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._threads = []
        self._issued = 0
        self._inflight = {}              # client -> socket of the request in flight
        self._deadline = None

    # ---- control
    def start(self):
        if self._threads:
            raise RuntimeError("loadgen: Load already started")
        self.started_wall = time.time()
        self._deadline = time.monotonic() + self.max_duration
        for i in range(self.clients):
            t = threading.Thread(target=self._client, args=(i,), name=f"loadgen-{i}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def stop(self, wait=True, abort=False):
        """Ask the clients to stop after their current request and return the outcomes.

        wait   join the clients (at most about one request timeout, or nearly nothing with abort)
        abort  also cut requests in flight now (they are counted in `aborted`, not recorded)
        """
        self._stop.set()
        if abort:
            self._abort.set()
            with self._lock:
                socks = list(self._inflight.values())
            for s in socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if wait:
            self.join()
        return self.outcomes

    def join(self, timeout=None):
        """Wait until every client ended (stopped or bound reached); False if `timeout` ran out first."""
        end = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return not self.running

    @property
    def running(self):
        return any(t.is_alive() for t in self._threads)

    @property
    def outcomes(self):
        with self._lock:
            return list(self._outcomes)

    def wait_good(self, count=1, timeout=30.0):
        """Wait until `count` more good answers arrived than when called; False on timeout or end."""
        end = time.monotonic() + timeout
        with self._cond:
            target = sum(1 for o in self._outcomes if o.kind == GOOD) + count
            while sum(1 for o in self._outcomes if o.kind == GOOD) < target:
                left = end - time.monotonic()
                if left <= 0 or (self._threads and not self.running):
                    return False
                self._cond.wait(min(left, 0.2))
            return True

    def summarize(self, fault_at, **kwargs):
        return summarize(self.outcomes, fault_at, **kwargs)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(abort=True)
        return False

    # ---- clients
    def _take_ticket(self):
        with self._lock:
            if self._issued >= self.max_requests:
                return False
            self._issued += 1
            return True

    def _client(self, idx):
        seq = 0
        while not self._stop.is_set() and time.monotonic() < self._deadline and self._take_ticket():
            began = time.monotonic()
            stream = (seq + idx) % 2 == 1
            out = self._request(idx, seq, stream)
            if out is not None:
                with self._cond:
                    self._outcomes.append(out)
                    self._cond.notify_all()
                if self.on_outcome is not None:
                    try:
                        self.on_outcome(out)
                    except Exception as e:  # noqa: BLE001 (a broken callback must not kill the load)
                        print(f"loadgen: on_outcome failed: {e!r}", file=sys.stderr)
            seq += 1
            pause = self.interval - (time.monotonic() - began)
            if pause > 0:
                self._stop.wait(pause)

    def _body(self, idx, seq, stream):
        body = {"model": self.model, "max_tokens": self.max_tokens, "stream": stream,
                "messages": [{"role": "user", "content": f"{self.prompt} (client {idx}, request {seq})"}]}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return json.dumps(body).encode()

    def _request(self, idx, seq, stream):
        deadline = _Deadline(self.timeout)

        def on_connect(sock):
            deadline.sock = sock
            with self._lock:
                self._inflight[idx] = sock
            if self._abort.is_set():
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        opener = build_opener(on_connect)
        headers = {"content-type": "application/json",
                   "x-request-id": f"loadgen-{idx}-{seq}-{int(time.time() * 1000)}"}
        if self.api_key:
            headers["authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(self.url, data=self._body(idx, seq, stream), method="POST", headers=headers)
        out = Outcome(client=idx, seq=seq, stream=stream, start_wall=time.time(), start_mono=time.monotonic())
        try:
            self._exchange(opener, req, out, deadline, stream)
        finally:
            out.end_wall, out.end_mono = time.time(), time.monotonic()
            with self._lock:
                self._inflight.pop(idx, None)
        if self._abort.is_set() and out.kind != GOOD:
            with self._lock:
                self.aborted += 1
            return None
        return out

    def _exchange(self, opener, req, out, deadline, stream):
        resp = None
        try:
            try:
                resp = opener.open(req, timeout=self.timeout)
            except urllib.error.HTTPError as e:
                resp = e
            out.status = resp.status if hasattr(resp, "status") else resp.code
            headers = resp.headers
            if out.status == 200 and stream:
                state = StreamState()
                try:
                    for line in _read_lines(resp, deadline):
                        state.feed(line)
                except _Cut as e:
                    out.kind, out.detail = CONN_ERROR, _short(f"200 stream, {state.content} content events, then {e}")
                else:
                    out.kind, out.detail = state.classify()
                out.completion_tokens = state.completion_tokens
                return
            try:
                body = _read_body(resp, deadline)
            except _Cut as e:
                out.kind, out.detail = CONN_ERROR, _short(f"status {out.status}, then {e}")
                return
            has_ra = headers is not None and headers.get("Retry-After") is not None
            out.kind, out.detail, out.completion_tokens, out.retry_after = classify_json(out.status, body, has_ra)
        except Exception as e:  # noqa: BLE001 (every failure becomes an outcome)
            out.kind, out.detail = _classify_exception(e, out.status)
        finally:
            if resp is not None:
                try:
                    resp.close()
                except Exception:  # noqa: BLE001
                    pass


def _classify_exception(exc, status):
    """(kind, detail) for an exception raised while sending or reading a request."""
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        exc = reason if isinstance(reason, BaseException) else exc
    name = type(exc).__name__
    if isinstance(exc, (TimeoutError, socket.timeout)):
        where = "before any status" if status is None else f"after status {status}"
        return TIMEOUT, f"no complete answer within the timeout ({where})"
    if status is None and isinstance(exc, (ConnectionError, http.client.RemoteDisconnected)):
        return CONN_ERROR, _short(f"{name}: {exc}")
    if status is None and isinstance(exc, OSError):
        return CONN_ERROR, _short(f"{name}: {exc}")
    if isinstance(exc, http.client.HTTPException):
        return BAD, _short(f"HTTP protocol error {name}: {exc}")
    return BAD, _short(f"{name}: {exc}" + (f" (after status {status})" if status is not None else ""))


# --------------------------------------------------------------------------- summary

def _field(o, name):
    return o[name] if isinstance(o, dict) else getattr(o, name)


def summarize(outcomes, fault_at, name=None, start=None, end=None):
    """Summary of outcomes (Outcome objects or their dicts) around a fault.

    All times are wall-clock epoch seconds (`time.time()`), like Outcome.start_wall/end_wall.
    fault_at  when the fault was injected
    start/end if given, only outcomes whose request started in [start, end) count
    Returns a dict: fault, fault_at, sent, good, honest_error, empty_200, conn_error, timeout, bad,
    retry_after (honest errors that carried Retry-After), first_good_after (seconds from fault_at to
    the end of the earliest-ending good answer whose request started at or after fault_at, None if
    none), longest_gap (longest time without a good answer: between the first request's start, the
    end of each good answer and the last request's end; None without outcomes), details (up to five
    distinct details of non-good outcomes).
    """
    rows = [o for o in outcomes
            if (start is None or _field(o, "start_wall") >= start) and (end is None or _field(o, "start_wall") < end)]
    summary = {"fault": name, "fault_at": fault_at, "sent": len(rows)}
    for kind in KINDS:
        summary[kind] = sum(1 for o in rows if _field(o, "kind") == kind)
    summary["retry_after"] = sum(1 for o in rows if _field(o, "kind") == HONEST_ERROR and _field(o, "retry_after"))
    goods = [o for o in rows if _field(o, "kind") == GOOD]
    after = [_field(o, "end_wall") for o in goods if _field(o, "start_wall") >= fault_at]
    summary["first_good_after"] = (min(after) - fault_at) if after else None
    if rows:
        points = sorted([min(_field(o, "start_wall") for o in rows)] + [_field(o, "end_wall") for o in goods]
                        + [max(_field(o, "end_wall") for o in rows)])
        summary["longest_gap"] = max(b - a for a, b in zip(points, points[1:])) if len(points) > 1 else 0.0
    else:
        summary["longest_gap"] = None
    details = []
    for o in rows:
        d = _field(o, "detail")
        if _field(o, "kind") != GOOD and d and f"{_field(o, 'kind')}: {d}" not in details:
            details.append(f"{_field(o, 'kind')}: {d}")
            if len(details) == 5:
                break
    summary["details"] = details
    return summary


TABLE_COLUMNS = (("fault", "fault"), ("sent", "sent"), ("good", "good"), ("honest_error", "honest errors"),
                 ("retry_after", "with Retry-After"), ("empty_200", "empty 200"), ("conn_error", "conn errors"),
                 ("timeout", "timeouts"), ("bad", "bad"), ("first_good_after", "first good after fault (s)"),
                 ("longest_gap", "longest gap without good (s)"))


def _cell(key, value):
    if key == "first_good_after" and value is None:
        return "never"
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def format_table(rows, columns=TABLE_COLUMNS):
    """Markdown table, one line per summary dict (as returned by summarize(); `fault` names the row).
    columns: (key, title) pairs; a caller may add keys of its own to the summaries and the columns."""
    lines = ["| " + " | ".join(title for _key, title in columns) + " |",
             "|" + "|".join("---" if key == "fault" else "---:" for key, _t in columns) + "|"]
    for i, row in enumerate(rows):
        cells = []
        for key, _title in columns:
            value = row.get(key)
            if key == "fault" and value is None:
                value = f"fault {i + 1}"
            cells.append(_cell(key, value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line

def _cmd_run(args):
    out_file = open(args.out, "a", encoding="utf-8") if args.out and args.out != "-" else sys.stdout
    lock = threading.Lock()

    def write(o):
        with lock:
            out_file.write(json.dumps(o.as_dict()) + "\n")
            out_file.flush()

    load = Load(args.base, args.model, clients=args.clients, timeout=args.timeout, max_tokens=args.max_tokens,
                max_duration=args.duration, max_requests=args.max_requests, on_outcome=write)
    done = threading.Event()

    def on_signal(_signum, _frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    load.start()
    while load.running and not done.wait(0.2):
        pass
    outcomes = load.stop(abort=True)
    s = summarize(outcomes, load.started_wall)
    print(f"loadgen: {s['sent']} requests: " + ", ".join(f"{k} {s[k]}" for k in KINDS)
          + (f"; {load.aborted} aborted at stop" if load.aborted else ""), file=sys.stderr)
    if out_file is not sys.stdout:
        out_file.close()
    return 0


def _cmd_table(args):
    outcomes = []
    with open(args.outcomes, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                outcomes.append(json.loads(line))
    faults = []
    for spec in args.fault:
        name, sep, at = spec.rpartition("=")
        try:
            when = float(at)
        except ValueError:
            when = None
        if not sep or not name or when is None:
            raise SystemExit(f"loadgen: --fault wants NAME=EPOCH (wall-clock seconds), got {spec!r}")
        faults.append((when, name))
    faults.sort()
    rows = []
    for i, (at, name) in enumerate(faults):
        nxt = faults[i + 1][0] if i + 1 < len(faults) else None
        rows.append(summarize(outcomes, at, name=name, start=at, end=nxt))
    sys.stdout.write(format_table(rows))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="loadgen.py", description="Bounded chat-completion load on a loopback proxy.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="send load until SIGTERM/SIGINT or a bound; outcomes as JSON lines")
    r.add_argument("--base", required=True, help="proxy base URL on 127.0.0.0/8 or localhost")
    r.add_argument("--model", required=True)
    r.add_argument("--clients", type=int, default=3)
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--max-tokens", type=int, default=8)
    r.add_argument("--duration", type=float, default=600.0, help="hard bound in seconds")
    r.add_argument("--max-requests", type=int, default=20000, help="hard bound on requests")
    r.add_argument("--out", default="-", help="file to append JSON lines to (default stdout)")
    t = sub.add_parser("table", help="markdown table of faults from a JSON-lines outcome file")
    t.add_argument("--outcomes", required=True)
    t.add_argument("--fault", action="append", required=True, help="NAME=EPOCH (wall clock), repeatable")
    args = p.parse_args(argv)
    try:
        return _cmd_run(args) if args.cmd == "run" else _cmd_table(args)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
