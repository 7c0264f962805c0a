# -*- coding: utf-8 -*-
"""The supervisor helper's effects, pinned through its functions in this process
(roles/supervise/files/a3_supervise.py): the record file, the log since the start, systemctl and docker calls,
process and TCP probes, HTTP requests to a loopback engine, and the journal/log notes."""
from __future__ import annotations

import http.server
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

HELPER = Path(__file__).resolve().parents[2] / "roles" / "supervise" / "files" / "a3_supervise.py"
if os.environ.get("A3_MUTATION_ROOT"):
    # tests/mutation.py: the helper as mutmut lays it out (its mutants are named after this import)
    sys.path.insert(0, os.environ["A3_MUTATION_ROOT"])
    import a3_supervise as sup  # noqa: E402
else:
    _spec = importlib.util.spec_from_file_location("a3_supervise", HELPER)
    sup = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sup)


# ---------------------------------------------------------------------------------------------- append_record

def test_append_record_writes_sorted_json_lines_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "deep" / "dir" / "u.jsonl"
    sup.append_record(str(path), {"t": 1, "reason": "b", "event": "exit"})
    sup.append_record(str(path), {"t": 2.5, "planned": True})
    assert path.read_text(encoding="utf-8") == (
        '{"event": "exit", "reason": "b", "t": 1}\n{"planned": true, "t": 2.5}\n')
    assert sorted(os.listdir(path.parent)) == ["u.jsonl"]


def test_append_record_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sup.append_record("r.jsonl", {"t": 1})
    assert (tmp_path / "r.jsonl").read_text() == '{"t": 1}\n' and os.listdir(tmp_path) == ["r.jsonl"]


def test_append_record_replaces_a_temporary_file_a_crash_left_behind(tmp_path):
    path = tmp_path / "u.jsonl"
    (tmp_path / "u.jsonl.tmp").write_text('{"t": 0, "reason": "half written')
    sup.append_record(str(path), {"t": 1})
    assert os.listdir(tmp_path) == ["u.jsonl"] and path.read_text() == '{"t": 1}\n'


def test_append_record_keeps_the_newest_lines(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_text("".join('{"t": %d}\n' % i for i in range(250)))
    sup.append_record(str(path), {"t": 1000})
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and lines[0] == '{"t": 51}' and lines[-2] == '{"t": 249}' and lines[-1] == '{"t": 1000}'


# -------------------------------------------------------------------------------------------- log_since_start

@pytest.mark.parametrize("offset, limit, expected", [
    ("4", 400000, "new line\n"),
    ("4\n", 400000, "new line\n"),
    ("", 400000, "old\nnew line\n"),                  # no offset saved: the whole log
    ("x", 400000, "old\nnew line\n"),
    ("1000", 400000, "old\nnew line\n"),              # the log is shorter than the offset: rotated, read it all
    ("13", 400000, ""),                               # nothing written since
    ("0", 5, "line\n"),                               # at most the last limit bytes
    ("10", 5, "ne\n"),
])
def test_log_since_start(tmp_path, offset, limit, expected):
    log = tmp_path / "vllm.log"
    log.write_bytes(b"old\nnew line\n")
    (tmp_path / "off").write_text(offset)
    assert sup.log_since_start(str(log), str(tmp_path / "off"), limit) == expected


def test_log_since_start_defaults_and_missing_files(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_bytes(b"a" * 400010 + b"\xff\n")
    got = sup.log_since_start(str(log), str(tmp_path / "no-offset"))
    assert got == "a" * 399998 + "\ufffd\n"           # the last 400000 bytes, bad UTF-8 replaced
    assert sup.log_since_start(str(tmp_path / "no-log"), str(tmp_path / "no-offset")) == ""


# ------------------------------------------------------------------------------------------ systemctl, docker

class _Runs:
    """A fake subprocess.run: records (argv, kwargs) and answers with the given result (or raises it)."""

    def __init__(self, result=None):
        self.calls, self.result = [], result

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def test_forgive_resets_the_start_limit_quietly(monkeypatch):
    runs = _Runs()
    monkeypatch.setattr(sup.subprocess, "run", runs)
    sup.forgive("u.service")
    assert runs.calls == [(["systemctl", "reset-failed", "u.service"],
                           {"check": False, "timeout": 30, "stdout": subprocess.DEVNULL,
                            "stderr": subprocess.DEVNULL})]


@pytest.mark.parametrize("error", [OSError("no systemctl"), subprocess.TimeoutExpired(["systemctl"], 30)])
def test_forgive_survives_a_failing_systemctl(monkeypatch, error):
    monkeypatch.setattr(sup.subprocess, "run", _Runs(error))
    assert sup.forgive("u.service") is None


@pytest.mark.parametrize("returncode, stdout, expected", [
    (0, "true\n", True),
    (0, " true ", True),
    (0, "false\n", False),
    (1, "true\n", False),
    (0, "", False),
])
def test_container_running(monkeypatch, returncode, stdout, expected):
    runs = _Runs(SimpleNamespace(returncode=returncode, stdout=stdout))
    monkeypatch.setattr(sup.subprocess, "run", runs)
    assert sup.container_running("vllm") is expected
    assert runs.calls == [(["docker", "inspect", "-f", "{{.State.Running}}", "vllm"],
                           {"capture_output": True, "text": True, "timeout": 20, "check": False})]


@pytest.mark.parametrize("error", [OSError("no docker"), subprocess.TimeoutExpired(["docker"], 20)])
def test_container_running_is_false_when_docker_fails(monkeypatch, error):
    monkeypatch.setattr(sup.subprocess, "run", _Runs(error))
    assert sup.container_running("vllm") is False


def test_systemctl_show_asks_for_the_properties_and_parses_the_answer(monkeypatch):
    runs = _Runs(SimpleNamespace(returncode=0, stdout="ActiveState=active\nno equals sign\nExecStart=a=b c\nSub=\n"))
    monkeypatch.setattr(sup.subprocess, "run", runs)
    assert sup.systemctl_show("u.service", ["ActiveState", "ExecStart"]) == {
        "ActiveState": "active", "ExecStart": "a=b c", "Sub": ""}
    assert runs.calls == [(["systemctl", "show", "u.service", "-p", "ActiveState,ExecStart"],
                           {"capture_output": True, "text": True, "timeout": 20, "check": False})]


@pytest.mark.parametrize("error", [OSError("no systemctl"), subprocess.TimeoutExpired(["systemctl"], 20)])
def test_systemctl_show_is_empty_when_systemctl_fails(monkeypatch, error):
    monkeypatch.setattr(sup.subprocess, "run", _Runs(error))
    assert sup.systemctl_show("u.service", ["ActiveState"]) == {}


# ------------------------------------------------------------------------------------------- pid_alive, tcp

def test_pid_alive(monkeypatch):
    child = subprocess.Popen(["true"])
    child.wait()
    assert sup.pid_alive(str(os.getpid())) is True
    assert sup.pid_alive(str(child.pid)) is False
    assert sup.pid_alive("") is True                  # MAINPID unset: cannot tell
    assert sup.pid_alive("x") is True

    def refuse(pid, sig):
        assert (pid, sig) == (4242, 0)
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(sup.os, "kill", refuse)
    assert sup.pid_alive("4242") is True


def test_tcp_open_against_a_loopback_listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        assert sup.tcp_open("127.0.0.1:%d" % port) is True
    finally:
        srv.close()
    assert sup.tcp_open("127.0.0.1:%d" % port) is False
    assert sup.tcp_open("127.0.0.1:notaport") is False


def test_tcp_open_connects_to_the_host_and_port_with_its_timeout(monkeypatch):
    seen = []

    class Conn:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def connect(address, timeout):
        seen.append((address, timeout))
        return Conn()
    monkeypatch.setattr(sup.socket, "create_connection", connect)
    assert sup.tcp_open("fe80::1:8000") is True
    assert sup.tcp_open("127.0.0.1:80", 0.5) is True
    assert seen == [(("fe80::1", 8000), 2.0), (("127.0.0.1", 80), 0.5)]


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tcp_open_of_a_list_is_any_one_of_them():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port, closed, closed2 = srv.getsockname()[1], _closed_port(), _closed_port()
    try:
        assert sup.tcp_open("127.0.0.1:%d,127.0.0.1:%d" % (closed, port)) is True
        assert sup.tcp_open("127.0.0.1:%d, 127.0.0.1:%d ,127.0.0.1:%d" % (closed, closed2, port)) is True
        assert sup.tcp_open("127.0.0.1:%d,127.0.0.1:%d" % (port, closed)) is True
        assert sup.tcp_open("127.0.0.1:notaport,127.0.0.1:%d" % port) is True
        assert sup.tcp_open("127.0.0.1:%d,127.0.0.1:%d" % (closed, closed2)) is False
    finally:
        srv.close()
    assert sup.tcp_open("127.0.0.1:%d,127.0.0.1:%d" % (closed, port)) is False


def test_tcp_open_of_a_list_tries_each_in_turn_with_its_timeout_until_one_connects(monkeypatch):
    seen = []

    class Conn:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def connect(address, timeout):
        seen.append((address, timeout))
        if address[0] != "ok":
            raise ConnectionRefusedError(111, "refused")
        return Conn()
    monkeypatch.setattr(sup.socket, "create_connection", connect)
    assert sup.tcp_open("a:1,fe80::1:2, ok:3,b:4", 0.5) is True
    assert seen == [(("a", 1), 0.5), (("fe80::1", 2), 0.5), (("ok", 3), 0.5)]
    seen.clear()
    assert sup.tcp_open("a:1,b:2") is False
    assert seen == [(("a", 1), 2.0), (("b", 2), 2.0)]


@pytest.mark.parametrize("value, label", [
    ("h:1", "h:1"), ("fe80::1:8000", "fe80::1:8000"),
    ("h1:1,h2:2,h3:3", "one of h1:1, h2:2, h3:3"), ("h1:1, h2:2", "one of h1:1, h2:2")])
def test_tcp_label(value, label):
    assert sup.tcp_label(value) == label


# -------------------------------------------------------------------------------------------------- http_status

class _Engine:
    """A loopback HTTP server: answers[path] = (status, raw body); records (method, path, headers, body)."""

    def __init__(self, answers):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
                status, data = answers[self.path]
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args):
                pass
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True).start()
        self.base = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def engine():
    made = []

    def start(answers):
        made.append(_Engine(answers))
        return made[-1]
    yield start
    for one in made:
        one.close()


def test_http_status_gets_without_a_body_and_posts_json_with_headers(engine, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")       # never through a proxy
    monkeypatch.setenv("no_proxy", "")
    srv = engine({"/health": (200, b""), "/v1/completions": (200, b'{"choices": [{"text": "x"}]}'),
                  "/bad": (200, b"not json"), "/401": (401, b'{"error": "Unauthorized"}')})
    assert sup.http_status(srv.base + "/health", 2) == (200, None)
    assert sup.http_status(srv.base + "/v1/completions", 2, {"model": "m"}, {"Authorization": "Bearer k"}) == (
        200, {"choices": [{"text": "x"}]})
    assert sup.http_status(srv.base + "/bad", 2) == (200, None)
    assert sup.http_status(srv.base + "/401", 2, {"a": 1}) == (401, None)
    (m1, p1, h1, b1), (m2, p2, h2, b2), _bad, (m4, _p4, h4, b4) = srv.seen
    assert (m1, p1, b1, "Content-Type" in h1, "Authorization" in h1) == ("GET", "/health", b"", False, False)
    assert (m2, p2, b2) == ("POST", "/v1/completions", b'{"model": "m"}')
    assert (h2["Content-Type"], h2["Authorization"]) == ("application/json", "Bearer k")
    assert (m4, b4, h4["Content-Type"], "Authorization" in h4) == ("POST", b'{"a": 1}', "application/json", False)


def test_http_status_with_headers_only_sends_them_on_a_get(engine):
    srv = engine({"/health": (200, b"{}")})
    assert sup.http_status(srv.base + "/health", 2, None, {"X-Probe": "1"}) == (200, {})
    method, _path, headers, _body = srv.seen[0]
    assert (method, headers["X-Probe"], "Content-Type" in headers) == ("GET", "1", False)


def test_http_status_is_zero_when_nothing_answers():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()
    assert sup.http_status("http://127.0.0.1:%d/health" % port, 1) == (0, None)
    assert sup.http_status("http://127.0.0.1:%d/health" % port, 1, {"a": 1}, {"Authorization": "Bearer a\nb"}) == (
        0, None)                                      # a header value http.client refuses


def test_http_status_passes_its_timeout(monkeypatch):
    seen = []

    def opened(req, timeout):
        seen.append((req.get_method(), req.full_url, timeout))
        raise socket.timeout("timed out")
    monkeypatch.setattr(sup._OPENER, "open", opened)
    assert sup.http_status("http://127.0.0.1:1/health", 3.5) == (0, None)
    assert seen == [("GET", "http://127.0.0.1:1/health", 3.5)]


# ---------------------------------------------------------------------------------------------------- _note

def test_note_prints_and_appends_a_dated_line_to_the_log(tmp_path, capsys):
    log = tmp_path / "vllm.log"
    log.write_text("before\n")
    sup._note(str(log), "waiting")
    sup._note("", "no log")
    sup._note(str(tmp_path / "missing-dir" / "x.log"), "unwritable")
    assert capsys.readouterr().out == "waiting\nno log\nunwritable\n"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "before" and len(lines) == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d a3_supervise: waiting", lines[1]), lines[1]


def test_note_writes_utf8(tmp_path, monkeypatch):
    monkeypatch.setattr(sup.time, "strftime", lambda fmt: "<%s>" % fmt)
    log = tmp_path / "vllm.log"
    sup._note(str(log), "Wartezeit ✓")
    assert log.read_bytes() == "<%Y-%m-%d %H:%M:%S> a3_supervise: Wartezeit ✓\n".encode("utf-8")


# ------------------------------------------------------------------------------- UTF-8 whatever the locale says

@pytest.fixture
def ascii_locale():
    """The process' locale says ASCII (a unit started without LANG, say): the helper's files are UTF-8 all the same."""
    import locale
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_files_are_read_and_written_as_utf8_under_an_ascii_locale(ascii_locale, tmp_path, capsys):
    record = tmp_path / "u.jsonl"
    record.write_bytes('{"t": 1, "reason": "Überlauf ✗"}\n'.encode("utf-8"))
    assert sup.read_record(str(record)) == [{"t": 1, "reason": "Überlauf ✗"}]
    key = tmp_path / "key"
    key.write_bytes("schlüssel\n".encode("utf-8"))
    assert sup.read_api_key(str(key)) == ("schlüssel", "")
    log = tmp_path / "vllm.log"
    sup._note(str(log), "wartet auf Rang ✓")
    assert log.read_bytes().decode("utf-8").endswith(" a3_supervise: wartet auf Rang ✓\n")
    Path(str(record) + ".canary").write_bytes('{"unauthorized": {"http://ränk:1": 401}}'.encode("utf-8"))
    assert sup.canary_unauthorized(str(record)) == ["http://ränk:1 (HTTP 401)"]
    capsys.readouterr()


def test_the_saved_log_offset_is_read_as_utf8_under_an_ascii_locale(ascii_locale, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_bytes(b"old\nnew line\n")
    offset = tmp_path / "off"
    offset.write_bytes("\uff14".encode("utf-8"))         # a fullwidth 4: int() reads it as 4
    assert sup.log_since_start(str(log), str(offset)) == "new line\n"
