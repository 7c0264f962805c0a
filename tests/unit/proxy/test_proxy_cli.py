# -*- coding: utf-8 -*-
"""a3proxy.cli: the wrapper's options, split from the upstream's."""
from __future__ import annotations

import subprocess
import sys

import pytest
from a3proxy import cli

from proxy_fakes import FILES


def test_imports_without_the_web_stack():
    """Every module imports with fastapi, starlette, httpx and uvicorn missing (they are imported when the proxy
    runs), and the entry script reports a usage error without them."""
    code = ("import sys\n"
            "for name in ('fastapi', 'starlette', 'httpx', 'uvicorn'):\n"
            "    sys.modules[name] = None  # any import of them fails\n"
            "sys.path.insert(0, %r)\n"
            "from a3proxy import answers, apps, auth, cli, core, engine, etcd, health, limits, main, metrics\n"
            "from a3proxy import rotation, server\n"
            "print(answers.classify_answer(200, b'').code)\n" % str(FILES))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "502"
    out = subprocess.run([sys.executable, str(FILES / "a3_proxy.py"), "--a3-probe", "1"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2 and "unrecognized arguments: --a3-probe" in out.stderr


def test_split_keeps_the_upstream_arguments_in_order():
    argv = ["--port", "8088", "--a3-probe-interval", "1.5", "--prefiller-hosts", "a", "b", "--a3-fail-threshold=4",
            "--prefiller-ports", "1", "2", "--decoder-hosts", "c", "--decoder-ports", "3", "--max-retries", "3",
            "--a3-max-inflight=9", "--a3-admin-port", "9000"]
    ours, rest = cli.split_argv(argv)
    assert ours.a3_probe_interval == 1.5 and ours.a3_fail_threshold == 4
    assert ours.a3_max_inflight == 9 and ours.a3_admin_port == 9000
    assert rest == ["--port", "8088", "--prefiller-hosts", "a", "b", "--prefiller-ports", "1", "2",
                    "--decoder-hosts", "c", "--decoder-ports", "3", "--max-retries", "3"]


def test_split_defaults():
    ours, rest = cli.split_argv([])
    assert rest == []
    assert (ours.a3_probe_interval, ours.a3_probe_timeout, ours.a3_fail_threshold, ours.a3_first_byte_timeout,
            ours.a3_retry_after, ours.a3_upstream_script) == (5.0, 2.0, 3, 300.0, 10, None)
    assert (ours.a3_admin_host, ours.a3_admin_port, ours.a3_secrets_file) == ("127.0.0.1", 8089, None)
    assert (ours.a3_max_body_bytes, ours.a3_max_inflight, ours.a3_header_timeout, ours.a3_body_timeout,
            ours.a3_idle_timeout) == (16 * 1024 * 1024, 512, 10.0, 30.0, 120.0)
    assert (ours.a3_etcd, ours.a3_etcd_ca, ours.a3_etcd_cert, ours.a3_etcd_key, ours.a3_etcd_endpoint) == (None,) * 5


@pytest.mark.parametrize("argv, text", [
    (["--a3-probe-intervall", "1"], "unrecognized arguments: --a3-probe-intervall"),
    (["--a3-probe", "1"], "unrecognized arguments: --a3-probe"),           # no abbreviations
    (["--a3-probe-interval", "0"], "greater than 0"),
    (["--a3-probe-timeout", "-1"], "greater than 0"),
    (["--a3-idle-timeout", "inf"], "greater than 0"),
    (["--a3-header-timeout", "nan"], "greater than 0"),
    (["--a3-fail-threshold", "0"], "at least 1"),
    (["--a3-max-body-bytes", "0"], "at least 1"),
    (["--a3-max-inflight", "-3"], "at least 1"),
    (["--a3-admin-port", "70000"], "port from 1 to 65535"),
    (["--a3-admin-port", "0"], "port from 1 to 65535"),
    (["--a3-retry-after", "x"], "invalid integer value: 'x'"),
    (["--a3-probe-interval", "soon"], "invalid number value: 'soon'"),
    (["--a3-first-byte-timeout"], "expected one argument"),
    (["--a3-etcd", "nohost"], "--a3-etcd must be host:port"),
    (["--a3-etcd-ca", "ca.crt"], "--a3-etcd-ca without --a3-etcd"),
    (["--a3-etcd", "h:1", "--a3-etcd-cert", "c", "--a3-etcd-key", "k"], "need an https:// etcd address"),
    (["--a3-etcd", "https://h:1", "--a3-etcd-key", "k"], "go together"),
])
def test_split_rejects_bad_options(argv, text):
    with pytest.raises(cli.UsageError, match=text):
        cli.split_argv(argv)


def test_split_parses_the_etcd_address():
    ours, _unused = cli.split_argv(["--a3-etcd", "https://10.0.0.1:2379", "--a3-etcd-ca", "ca", "--a3-etcd-cert", "c",
                                    "--a3-etcd-key", "k"])
    assert ours.a3_etcd_endpoint.base_url == "https://10.0.0.1:2379"
    ours, _unused = cli.split_argv(["--a3-etcd", "10.0.0.1:2379"])
    assert ours.a3_etcd_endpoint.base_url == "http://10.0.0.1:2379"


def test_unknown_upstream_options_are_left_to_the_upstream_parser():
    _unused, rest = cli.split_argv(["--bogus", "1"])
    assert rest == ["--bogus", "1"]


def test_wants_help():
    assert cli.wants_help(["--port", "1", "-h"]) and cli.wants_help(["--help"])
    assert not cli.wants_help(["--port", "1"])


@pytest.mark.parametrize("public, admin, conflict", [
    (("0.0.0.0", 8088), ("127.0.0.1", 8089), False),
    (("0.0.0.0", 8088), ("127.0.0.1", 8088), True),     # the wildcard holds every address
    (("127.0.0.1", 8088), ("::", 8088), True),
    (("localhost", 8088), ("127.0.0.1", 8088), True),   # a name may be the same address
    (("10.0.0.1", 8088), ("127.0.0.1", 8088), False),   # two addresses, one port each
    (("10.0.0.1", 8088), ("10.0.0.1", 8088), True),
])
def test_listener_conflict(public, admin, conflict):
    why = cli.listener_conflict(public[0], public[1], admin[0], admin[1])
    assert bool(why) is conflict
    if conflict:
        assert "--a3-admin-port" in why


def test_ds_worker_options():
    ours, rest = cli.split_argv(["--a3-etcd", "127.0.0.1:2379", "--a3-ds-worker", "a:1", "--a3-ds-worker", "b:1"])
    assert rest == [] and ours.a3_etcd == "127.0.0.1:2379" and ours.a3_ds_worker == ["a:1", "b:1"]
    ours, _unused = cli.split_argv([])
    assert ours.a3_etcd is None and ours.a3_ds_worker == []
