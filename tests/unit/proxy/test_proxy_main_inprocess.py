# -*- coding: utf-8 -*-
"""a3proxy.main in this process: every way the command line ends before serving (usage, help, the upstream
script, its own argument check, the listeners' conflict, the secrets file) with its exact message and exit
status 2, and a good command line up to the servers (server.serve replaced by a recorder): the core, both
listeners with their secrets, the log line naming what is wrapped, the logging set up."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from a3proxy import apps, core, main, server

UPSTREAM = '''
import argparse, sys
CALLS = []
class ServerState(object):
    def __init__(self, host, port):
        self.host, self.port, self.client = host, port, None
class ProxyState(object):
    pass
app = object()
def parse_args():
    CALLS.append(list(sys.argv))
    if "-h" in sys.argv:
        print("upstream help")
        raise SystemExit(0)
    if "--bad" in sys.argv:
        raise ValueError("Number of prefiller hosts must match number of prefiller ports")
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 8000
    return argparse.Namespace(host="127.0.0.1", port=port, prefiller_instances=[("10.0.0.1", 7001)],
                              decoder_instances=[("10.0.0.2", 7002), ("10.0.0.3", 7003)])
'''


@pytest.fixture
def script(tmp_path, monkeypatch):
    """The upstream stand-in script, the argv[0] of the wrapper, and the upstream module forgotten afterwards."""
    path = tmp_path / "up.py"
    path.write_text(UPSTREAM, encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["/opt/a3/a3_proxy.py"])
    monkeypatch.delitem(sys.modules, "load_balance_proxy_server_example", raising=False)
    return str(path)


@pytest.fixture
def served(monkeypatch):
    """server.serve replaced: what main hands it, and its exit status 0."""
    seen = []

    async def serve(the_core, listeners, header_timeout):
        seen.append((the_core, listeners, header_timeout))
        return 0

    monkeypatch.setattr(server, "serve", serve)
    return seen


def test_a_usage_error(script, capsys):
    assert main.main(["--a3-probe", "1", "--port", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[-1] == "a3_proxy.py: error: unrecognized arguments: --a3-probe"
    assert err.startswith("usage: a3_proxy.py [--a3-probe-interval S]")


def test_the_command_line_comes_from_sys_argv(script, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/wrapper.py", "--a3-max-inflight", "0"])
    assert main.main() == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "wrapper.py: error: argument --a3-max-inflight: must be at least 1, got 0"
    assert err.startswith("usage: wrapper.py ")


def test_an_empty_program_name(script, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/"])
    assert main.main(["--a3-upstream-script", "/nonexistent/up.py"]) == 2
    assert capsys.readouterr().err == ("a3_proxy.py: error: the upstream proxy script /nonexistent/up.py does not "
                                       "exist\n")


def test_help_shows_ours_then_the_upstreams(script, capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(["-h", "--a3-upstream-script", script])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: a3_proxy.py [--a3-probe-interval S]")
    assert out.endswith("\n\nThe options of load_balance_proxy_server_example.py follow.\n\nupstream help\n")
    assert "--a3-admin-port PORT" in out


def test_the_default_upstream_script_is_beside_the_package(script, capsys):
    import a3proxy
    beside = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a3proxy.__file__))),
                          "load_balance_proxy_server_example.py")
    assert not os.path.exists(beside)
    assert main.main([]) == 2
    assert capsys.readouterr().err == "a3_proxy.py: error: the upstream proxy script %s does not exist\n" % beside


def test_the_upstreams_own_check(script, capsys):
    assert main.main(["--a3-upstream-script", script, "--bad"]) == 2
    assert capsys.readouterr().err == ("a3_proxy.py: error: Number of prefiller hosts must match number of "
                                       "prefiller ports\n")
    assert sys.modules["load_balance_proxy_server_example"].CALLS == [["a3_proxy.py", "--bad"]]


def test_the_listeners_conflict(script, capsys):
    assert main.main(["--a3-upstream-script", script, "--port", "9000", "--a3-admin-port", "9000"]) == 2
    assert capsys.readouterr().err == (
        "a3_proxy.py: error: the admin listener 127.0.0.1:9000 would share the public listener's port (--host "
        "127.0.0.1 --port 9000): give --a3-admin-port another port\n")


def test_a_secrets_file_that_cannot_be_used(script, capsys, tmp_path):
    missing = tmp_path / "none.json"
    assert main.main(["--a3-upstream-script", script, "--a3-secrets-file", str(missing)]) == 2
    assert capsys.readouterr().err == ("a3_proxy.py: error: cannot use the secrets file: [Errno 2] No such file or "
                                       "directory: '%s'\n" % missing)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"admin_token": 1}', encoding="utf-8")
    assert main.main(["--a3-upstream-script", script, "--a3-secrets-file", str(wrong)]) == 2
    assert capsys.readouterr().err == ("a3_proxy.py: error: cannot use the secrets file: %s: admin_token must be a "
                                       "string\n" % wrong)


def test_a_good_command_line_builds_the_core_and_both_listeners(script, served, tmp_path, caplog):
    secrets = tmp_path / "s.json"
    secrets.write_text('{"api_keys": ["k1", "k2"], "admin_token": "tok"}', encoding="utf-8")
    os.chmod(secrets, 0o644)
    argv = ["--a3-upstream-script", script, "--port", "8100", "--a3-admin-host", "127.0.0.2", "--a3-admin-port",
            "8101", "--a3-secrets-file", str(secrets), "--a3-header-timeout", "3.5"]
    with caplog.at_level(logging.INFO, logger="a3_proxy"):
        assert main.main(argv) == 0
    [(the_core, listeners, header_timeout)] = served
    assert header_timeout == 3.5 and isinstance(the_core, core.HonestProxy)
    upstream = sys.modules["load_balance_proxy_server_example"]
    assert the_core.up is upstream and upstream.global_args.port == 8100
    assert the_core.secrets == (("k1", "k2"), "tok", "") and the_core.opt.a3_admin_port == 8101
    [(public, host, port), (admin, admin_host, admin_port)] = listeners
    assert (type(public), host, port, public.api_keys, public.core, public.opt) == (
        apps.PublicApp, "127.0.0.1", 8100, ("k1", "k2"), the_core, the_core.opt)
    assert (type(admin), admin_host, admin_port, admin.admin_token, admin.core) == (
        apps.AdminApp, "127.0.0.2", 8101, "tok", the_core)
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "a3_proxy"] == [
        ("WARNING", "%s is readable by others than its owner (mode 0644): make it 0600" % secrets),
        ("INFO", "wrapping %s: prefill 10.0.0.1:7001, decode 10.0.0.2:7002 10.0.0.3:7003; public listener "
                 "127.0.0.1:8100, admin listener 127.0.0.2:8101; client keys: 2, admin token: set, backend key: "
                 "none" % script)]


def test_without_secrets(script, served, tmp_path, caplog):
    secrets = tmp_path / "s.json"
    secrets.write_text('{"backend_api_key": "b"}', encoding="utf-8")
    os.chmod(secrets, 0o600)
    with caplog.at_level(logging.INFO, logger="a3_proxy"):
        assert main.main(["--a3-upstream-script", script, "--a3-secrets-file", str(secrets)]) == 0
        assert main.main(["--a3-upstream-script", script]) == 0
    messages = [r.getMessage() for r in caplog.records if r.name == "a3_proxy"]
    assert [m.split("; ", 2)[2] for m in messages] == ["client keys: none, admin token: none, backend key: set",
                                                       "client keys: none, admin token: none, backend key: none"]
    assert served[1][1][0][0].api_keys == () and served[1][1][1][0].admin_token == ""
    assert served[1][0].secrets == ((), "", "")
    assert (served[1][1][1][1], served[1][1][1][2]) == ("127.0.0.1", 8089)


def test_the_logging_and_stdout_it_sets_up(script, served, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    for name in ("httpx", "httpcore"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    stdout = open(os.devnull, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    monkeypatch.setattr(sys, "stdout", stdout)
    try:
        assert main.main(["--a3-upstream-script", script]) == 0
        assert stdout.line_buffering is True
    finally:
        stdout.close()
    assert root.level == logging.INFO and len(root.handlers) == 1
    assert root.handlers[0].formatter._fmt == "%(asctime)s %(levelname)s %(name)s: %(message)s"
    assert logging.getLogger("httpx").level == logging.WARNING and logging.getLogger("httpcore").level == \
        logging.WARNING
    root.handlers[0].close()


def test_a_stdout_that_cannot_be_reconfigured(script, served, monkeypatch):
    class Plain(object):
        def write(self, text):
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Plain())
    assert main.main(["--a3-upstream-script", script]) == 0


def test_the_script_name_in_the_upstream_parse(script, served):
    assert main.main(["--a3-upstream-script", script, "--port", "8200", "--a3-fail-threshold", "2"]) == 0
    assert sys.modules["load_balance_proxy_server_example"].CALLS == [["a3_proxy.py", "--port", "8200"]]
    assert served[0][0].opt.a3_fail_threshold == 2
    assert Path(script).exists()
