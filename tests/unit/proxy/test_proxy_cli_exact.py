# -*- coding: utf-8 -*-
"""a3proxy.cli, pinned whole: every option of the wrapper (its group, default, metavar, type and the help text an
operator reads in --help), the exact usage errors, and the admin listener's conflicts with the public one."""
from __future__ import annotations

import argparse

import pytest
from a3proxy import cli

WRAPPER = "wrapper options (a3)"
ADMIN = "admin listener (a3)"
LIMITS = "limits (a3)"
ENGINE = "engine (a3)"
# dest: (group, default, metavar, type name, help)
OPTIONS = {
    "a3_probe_interval": (WRAPPER, 5.0, "S", "number",
                          "seconds between two GET /health probes of every backend (default 5)"),
    "a3_probe_timeout": (WRAPPER, 2.0, "S", "number",
                         "seconds a probe may take before it counts as failed (default 2)"),
    "a3_fail_threshold": (WRAPPER, 3, "N", "integer",
                          "consecutive failed probes before a backend leaves the rotation (default 3)"),
    "a3_first_byte_timeout": (WRAPPER, 300.0, "S", "number",
                              "seconds a completion may take until its first body byte (a stream's first chunk, a "
                              "non-stream answer's body) before the client gets 503 (default 300)"),
    "a3_retry_after": (WRAPPER, 10, "S", "integer", "value of the Retry-After header of every 503 (default 10)"),
    "a3_upstream_script": (WRAPPER, None, "PATH", None,
                           "the upstream proxy script (default: load_balance_proxy_server_example.py next to "
                           "a3_proxy.py)"),
    "a3_etcd": (WRAPPER, None, "[https://]HOST:PORT[,...]", None,
                "etcd client address: each probe round reads the openYuanrong datasystem workers' registrations "
                "(/datasystem/cluster/) through etcd's JSON gateway for /metrics; https:// for etcd with TLS; an "
                "etcd cluster's members comma-separated (all http or all https): each read tries them in turn, the "
                "one that answered last first"),
    "a3_etcd_ca": (WRAPPER, None, "PATH", None,
                   "CA certificate of etcd's server certificate (https only; default: the system's)"),
    "a3_etcd_cert": (WRAPPER, None, "PATH", None, "client certificate for etcd (https only, with --a3-etcd-key)"),
    "a3_etcd_key": (WRAPPER, None, "PATH", None, "key of the client certificate (https only, with --a3-etcd-cert)"),
    "a3_ds_worker": (WRAPPER, [], "HOST:PORT", None,
                     "a datasystem worker address that must be registered and ready (repeat per worker; exported as "
                     "a3_proxy_ds_worker_registered)"),
    "a3_engine": (ENGINE, "upstream", None, None,
                  "what relays the completions: the upstream script in this process (upstream), or vllm-router as "
                  "this process's child (vllm-router: the wrapper starts it, registers the backends its probes hold "
                  "up and not drained, and serves /healthcheck, /v1/models and the admin listener; an edge in front "
                  "sends the completions to the router) (default upstream)"),
    "a3_router_bin": (ENGINE, None, "PATH", None, "the vllm-router executable (vllm-router engine only, required there)"),
    "a3_router_port": (ENGINE, None, "PORT", "port",
                       "port of the router's HTTP listener on 127.0.0.1 (vllm-router engine, required)"),
    "a3_router_discovery_port": (ENGINE, None, "PORT", "port",
                                 "port of the router's ZMQ service discovery on 127.0.0.1, where the wrapper registers "
                                 "the backends (vllm-router engine, required)"),
    "a3_router_metrics_port": (ENGINE, None, "PORT", "port",
                               "port of the router's Prometheus exporter on 127.0.0.1, read every probe round "
                               "(vllm-router engine, required)"),
    "a3_router_arg": (ENGINE, [], "ARG", None,
                      "one more argument of the router's command line, after the wrapper's own (repeat per argument; "
                      "write --a3-router-arg=--flag for one that starts with a dash)"),
    "a3_edge_stats": (ENGINE, None, "URL", None,
                      "http:// URL of the edge's CSV statistics (haproxy's stats;csv), read every probe round for "
                      "a3_proxy_requests_total of the completions (vllm-router engine only)"),
    "a3_admin_host": (ADMIN, "127.0.0.1", "ADDR", None,
                      "address of the admin listener: GET /healthcheck (with backend addresses), /a3/backends, "
                      "/metrics, POST /a3/drain, /a3/undrain, /instances/add, /instances/remove (default 127.0.0.1)"),
    "a3_admin_port": (ADMIN, 8089, "PORT", "port", "port of the admin listener (default 8089)"),
    "a3_secrets_file": (ADMIN, None, "PATH", None,
                        'JSON file (mode 0600) with the optional keys "api_keys" (client keys of the public '
                        'listener), "admin_token" (bearer token of the admin listener) and "backend_api_key" (sent '
                        "to the engines); secrets never go on the command line"),
    "a3_max_body_bytes": (LIMITS, 16777216, "N", "integer",
                          "largest request body; a larger one gets 413 before anything is forwarded "
                          "(default 16777216)"),
    "a3_max_inflight": (LIMITS, 512, "N", "integer",
                        "client requests open at once on the public listener; one more gets 503 with Retry-After "
                        "(default 512)"),
    "a3_header_timeout": (LIMITS, 10.0, "S", "number",
                          "seconds a connection may take to send a request's headers; then it is closed "
                          "(default 10)"),
    "a3_body_timeout": (LIMITS, 30.0, "S", "number",
                        "seconds a client may take to send a request's body; then 408 (default 30)"),
    "a3_idle_timeout": (LIMITS, 120.0, "S", "number",
                        "after the first byte of an answer, seconds without a byte from the backends before a stream "
                        "ends with an error event and a non-stream answer gets 504 (default 120)"),
}


def test_every_option_with_its_help():
    parser = cli.build_parser()
    found = {}
    for group in parser._action_groups:  # pylint: disable=protected-access
        for action in group._group_actions:  # pylint: disable=protected-access
            assert action.option_strings == ["--" + action.dest.replace("_", "-")]
            found[action.dest] = (group.title, action.default, action.metavar,
                                  getattr(action.type, "__name__", None), action.help)
    assert found == OPTIONS
    assert isinstance(parser._option_string_actions["--a3-ds-worker"], argparse._AppendAction)  # noqa: SLF001
    assert (parser.prog, parser.add_help, parser.allow_abbrev) == ("a3_proxy.py", False, False)
    assert parser.description == ("Options of the honest wrapper; all other options go to "
                                  "load_balance_proxy_server_example.py.")
    assert cli.build_parser("other.py").prog == "other.py"


def test_the_limits_constants():
    assert (cli.MAX_BODY_BYTES, cli.MAX_INFLIGHT, cli.HEADER_TIMEOUT, cli.BODY_TIMEOUT, cli.IDLE_TIMEOUT,
            cli.ADMIN_HOST, cli.ADMIN_PORT) == (16777216, 512, 10.0, 30.0, 120.0, "127.0.0.1", 8089)


@pytest.mark.parametrize("argv, message", [
    (["--a3-probe-interval", "0"], "argument --a3-probe-interval: must be greater than 0, got 0"),
    (["--a3-probe-timeout", "-0.5"], "argument --a3-probe-timeout: must be greater than 0, got -0.5"),
    (["--a3-idle-timeout=-inf"], "argument --a3-idle-timeout: must be greater than 0, got -inf"),
    (["--a3-body-timeout", "NaN"], "argument --a3-body-timeout: must be greater than 0, got NaN"),
    (["--a3-header-timeout", "1e400"], "argument --a3-header-timeout: must be greater than 0, got 1e400"),
    (["--a3-fail-threshold", "0"], "argument --a3-fail-threshold: must be at least 1, got 0"),
    (["--a3-max-inflight", "-1"], "argument --a3-max-inflight: must be at least 1, got -1"),
    (["--a3-admin-port", "0"], "argument --a3-admin-port: must be a port from 1 to 65535, got 0"),
    (["--a3-admin-port", "65536"], "argument --a3-admin-port: must be a port from 1 to 65535, got 65536"),
    (["--a3-admin-port", "http"], "argument --a3-admin-port: invalid port value: 'http'"),
    (["--a3-max-body-bytes", "1.5"], "argument --a3-max-body-bytes: invalid integer value: '1.5'"),
    (["--a3-first-byte-timeout", "x"], "argument --a3-first-byte-timeout: invalid number value: 'x'"),
    (["--a3-zzz", "--port", "1", "--a3-yyy=2"], "unrecognized arguments: --a3-zzz --a3-yyy=2"),
    (["--a3-etcd-cert", "c", "--a3-etcd-key", "k"], "--a3-etcd-cert, --a3-etcd-key without --a3-etcd"),
    (["--a3-etcd", "h:1", "--a3-etcd-ca", "ca"], "--a3-etcd-ca need an https:// etcd address (--a3-etcd h:1)"),
    (["--a3-etcd", "h:1,h:2", "--a3-etcd-ca", "ca"], "--a3-etcd-ca need an https:// etcd address (--a3-etcd h:1,h:2)"),
    (["--a3-etcd", "h:1,h:1"], "--a3-etcd names http://h:1 twice (h:1,h:1)"),
])
def test_the_usage_errors(argv, message):
    with pytest.raises(cli.UsageError) as err:
        cli.split_argv(argv)
    assert str(err.value) == message


@pytest.mark.parametrize("argv, dest, value", [
    (["--a3-probe-interval", "0.001"], "a3_probe_interval", 0.001),
    (["--a3-fail-threshold", "1"], "a3_fail_threshold", 1),
    (["--a3-admin-port", "1"], "a3_admin_port", 1),
    (["--a3-admin-port", "65535"], "a3_admin_port", 65535),
    (["--a3-retry-after=1"], "a3_retry_after", 1),
    (["--a3-upstream-script", "/x/up.py"], "a3_upstream_script", "/x/up.py"),
])
def test_the_edges_that_are_accepted(argv, dest, value):
    ours, rest = cli.split_argv(argv)
    assert getattr(ours, dest) == value and rest == []


def test_split_argv_reads_a_list_of_etcd_members():
    ours, rest = cli.split_argv(["--a3-etcd", "https://e1:2379,https://e2:2379", "--a3-etcd-ca", "ca"])
    assert rest == [] and ours.a3_etcd == "https://e1:2379,https://e2:2379"
    assert ours.a3_etcd_endpoint == (("https", "e1", 2379, "https://e1:2379"), ("https", "e2", 2379, "https://e2:2379"))


def test_split_argv_passes_the_prog_and_keeps_unknown_options():
    ours, rest = cli.split_argv(["-h", "--a3-etcd", "https://h:2379", "x"], prog="p.py")
    assert rest == ["-h", "x"] and ours.a3_etcd_endpoint == (("https", "h", 2379, "https://h:2379"),)


@pytest.mark.parametrize("rest, want", [([], False), (["-h"], True), (["--help"], True), (["--helpme"], False),
                                        (["-H"], False), (["x", "--port", "-h"], True)])
def test_wants_help(rest, want):
    assert cli.wants_help(rest) is want


@pytest.mark.parametrize("public, admin, conflict", [
    (("0.0.0.0", "8088"), ("127.0.0.1", 8088), True),       # ports compared as numbers
    (("::1", 8088), ("[::1]", 8088), True),                  # brackets do not make another address
    (("[::1]", 8088), ("[::2]", 8088), False),
    (("10.0.0.1", 8088), ("0.0.0.0", 8088), True),           # the wildcard on the admin side too
    (("10.0.0.1", 8088), ("::", 8088), True),
    (("127.0.0.1", 8088), ("127.0.0.2", 8088), False),
    (("127.0.0.1", 8088), ("host", 8088), True),
    (("host", 8088), ("host", 8089), False),
])
def test_listener_conflict(public, admin, conflict):
    why = cli.listener_conflict(public[0], public[1], admin[0], admin[1])
    if conflict:
        assert why == ("the admin listener %s:%s would share the public listener's port (--host %s --port %s): give "
                       "--a3-admin-port another port" % (admin[0], admin[1], public[0], public[1]))
    else:
        assert why is None
