# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The wrapper's command line: its own --a3-* options, split from the upstream script's arguments."""

import argparse
import ipaddress
import math

from . import UPSTREAM_FILE
from .etcd import check_etcd_options

# The defaults of the limits, also written in roles/proxy (defaults/main.yml, vars/main.yml): proxy.sh carries
# a limit only when its value differs from the default here (tests/unit/proxy checks that they agree).
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_INFLIGHT = 512
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
IDLE_TIMEOUT = 120.0
ADMIN_HOST = "127.0.0.1"
ADMIN_PORT = 8089
ENGINES = ("upstream", "vllm-router")
# The vllm-router engine's ports, all on 127.0.0.1 (its HTTP port, its ZMQ service discovery, its Prometheus
# exporter): no default, the role always passes them.
ROUTER_PORTS = (("a3_router_port", "--a3-router-port"), ("a3_router_discovery_port", "--a3-router-discovery-port"),
                ("a3_router_metrics_port", "--a3-router-metrics-port"))


class UsageError(Exception):
    """A problem with the wrapper's own options (reported like argparse does, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive_float(text):
    value = float(text)
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0, got %s" % text)
    return value


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %s" % text)
    return value


def _port(text):
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a port from 1 to 65535, got %s" % text)
    return value


# argparse names the type in its message for a value it cannot convert ("invalid number value: 'x'")
_positive_float.__name__ = "number"
_positive_int.__name__ = "integer"
_port.__name__ = "port"


def build_parser(prog="a3_proxy.py"):
    """The wrapper's own options. Everything else belongs to the upstream script's parser."""
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False,
                     description="Options of the honest wrapper; all other options go to %s." % UPSTREAM_FILE)
    group = parser.add_argument_group("wrapper options (a3)")
    group.add_argument("--a3-probe-interval", type=_positive_float, default=5.0, metavar="S",
                       help="seconds between two GET /health probes of every backend (default 5)")
    group.add_argument("--a3-probe-timeout", type=_positive_float, default=2.0, metavar="S",
                       help="seconds a probe may take before it counts as failed (default 2)")
    group.add_argument("--a3-fail-threshold", type=_positive_int, default=3, metavar="N",
                       help="consecutive failed probes before a backend leaves the rotation (default 3)")
    group.add_argument("--a3-first-byte-timeout", type=_positive_float, default=300.0, metavar="S",
                       help="seconds a completion may take until its first body byte (a stream's first chunk, "
                            "a non-stream answer's body) before the client gets 503 (default 300)")
    group.add_argument("--a3-retry-after", type=_positive_int, default=10, metavar="S",
                       help="value of the Retry-After header of every 503 (default 10)")
    group.add_argument("--a3-upstream-script", default=None, metavar="PATH",
                       help="the upstream proxy script (default: %s next to a3_proxy.py)" % UPSTREAM_FILE)
    group.add_argument("--a3-etcd", default=None, metavar="[https://]HOST:PORT[,...]",
                       help="etcd client address: each probe round reads the openYuanrong datasystem workers' "
                            "registrations (/datasystem/cluster/) through etcd's JSON gateway for /metrics; "
                            "https:// for etcd with TLS; an etcd cluster's members comma-separated (all http or "
                            "all https): each read tries them in turn, the one that answered last first")
    group.add_argument("--a3-etcd-ca", default=None, metavar="PATH",
                       help="CA certificate of etcd's server certificate (https only; default: the system's)")
    group.add_argument("--a3-etcd-cert", default=None, metavar="PATH",
                       help="client certificate for etcd (https only, with --a3-etcd-key)")
    group.add_argument("--a3-etcd-key", default=None, metavar="PATH",
                       help="key of the client certificate (https only, with --a3-etcd-cert)")
    group.add_argument("--a3-ds-worker", action="append", default=[], metavar="HOST:PORT",
                       help="a datasystem worker address that must be registered and ready (repeat per worker; "
                            "exported as a3_proxy_ds_worker_registered)")
    engine = parser.add_argument_group("engine (a3)")
    engine.add_argument("--a3-engine", choices=ENGINES, default="upstream",
                        help="what relays the completions: the upstream script in this process (upstream), or "
                             "vllm-router as this process's child (vllm-router: the wrapper starts it, registers "
                             "the backends its probes hold up and not drained, and serves /healthcheck, /v1/models "
                             "and the admin listener; an edge in front sends the completions to the router) "
                             "(default upstream)")
    engine.add_argument("--a3-router-bin", default=None, metavar="PATH",
                        help="the vllm-router executable (vllm-router engine only, required there)")
    engine.add_argument("--a3-router-port", type=_port, default=None, metavar="PORT",
                        help="port of the router's HTTP listener on 127.0.0.1 (vllm-router engine, required)")
    engine.add_argument("--a3-router-discovery-port", type=_port, default=None, metavar="PORT",
                        help="port of the router's ZMQ service discovery on 127.0.0.1, where the wrapper registers "
                             "the backends (vllm-router engine, required)")
    engine.add_argument("--a3-router-metrics-port", type=_port, default=None, metavar="PORT",
                        help="port of the router's Prometheus exporter on 127.0.0.1, read every probe round "
                             "(vllm-router engine, required)")
    engine.add_argument("--a3-router-arg", action="append", default=[], metavar="ARG",
                        help="one more argument of the router's command line, after the wrapper's own (repeat per "
                             "argument; write --a3-router-arg=--flag for one that starts with a dash)")
    engine.add_argument("--a3-edge-stats", default=None, metavar="URL",
                        help="http:// URL of the edge's CSV statistics (haproxy's stats;csv), read every probe "
                             "round for a3_proxy_requests_total of the completions (vllm-router engine only)")
    admin = parser.add_argument_group("admin listener (a3)")
    admin.add_argument("--a3-admin-host", default=ADMIN_HOST, metavar="ADDR",
                       help="address of the admin listener: GET /healthcheck (with backend addresses), "
                            "/a3/backends, /metrics, POST /a3/drain, /a3/undrain, /instances/add, /instances/remove "
                            "(default %s)" % ADMIN_HOST)
    admin.add_argument("--a3-admin-port", type=_port, default=ADMIN_PORT, metavar="PORT",
                       help="port of the admin listener (default %d)" % ADMIN_PORT)
    admin.add_argument("--a3-secrets-file", default=None, metavar="PATH",
                       help='JSON file (mode 0600) with the optional keys "api_keys" (client keys of the public '
                            'listener), "admin_token" (bearer token of the admin listener) and "backend_api_key" '
                            "(sent to the engines); secrets never go on the command line")
    limits = parser.add_argument_group("limits (a3)")
    limits.add_argument("--a3-max-body-bytes", type=_positive_int, default=MAX_BODY_BYTES, metavar="N",
                        help="largest request body; a larger one gets 413 before anything is forwarded "
                             "(default %d)" % MAX_BODY_BYTES)
    limits.add_argument("--a3-max-inflight", type=_positive_int, default=MAX_INFLIGHT, metavar="N",
                        help="client requests open at once on the public listener; one more gets 503 with "
                             "Retry-After (default %d)" % MAX_INFLIGHT)
    limits.add_argument("--a3-header-timeout", type=_positive_float, default=HEADER_TIMEOUT, metavar="S",
                        help="seconds a connection may take to send a request's headers; then it is closed "
                             "(default %g)" % HEADER_TIMEOUT)
    limits.add_argument("--a3-body-timeout", type=_positive_float, default=BODY_TIMEOUT, metavar="S",
                        help="seconds a client may take to send a request's body; then 408 (default %g)"
                             % BODY_TIMEOUT)
    limits.add_argument("--a3-idle-timeout", type=_positive_float, default=IDLE_TIMEOUT, metavar="S",
                        help="after the first byte of an answer, seconds without a byte from the backends before "
                             "a stream ends with an error event and a non-stream answer gets 504 (default %g)"
                             % IDLE_TIMEOUT)
    return parser


def split_argv(argv, prog="a3_proxy.py"):
    """Split a command line into (our options, the upstream's arguments in their original order).

    Raises UsageError for a malformed --a3-* option, for an --a3-* option we do not know (the upstream
    parser would reject it too, but with a less helpful message) and for etcd options that do not fit
    together. Abbreviations are not accepted.
    """
    parser = build_parser(prog)
    ours, rest = parser.parse_known_args(list(argv))
    unknown = [arg for arg in rest if arg.startswith("--a3-")]
    if unknown:
        raise UsageError("unrecognized arguments: %s" % " ".join(unknown))
    try:
        ours.a3_etcd_endpoint = check_etcd_options(ours.a3_etcd, ours.a3_etcd_ca, ours.a3_etcd_cert,
                                                   ours.a3_etcd_key)
    except ValueError as exc:
        raise UsageError(str(exc))
    why = router_options_problem(ours)
    if why:
        raise UsageError(why)
    return ours, rest


def router_options_problem(ours):
    """What is wrong with the vllm-router engine's options (None when nothing is, or with the upstream engine,
    which does not read them): the executable and the three ports are required, the ports must differ from each
    other and from the admin listener's (compared as numbers, whatever the admin address: the router listens
    on 127.0.0.1, which a wildcard admin listener covers too), the edge's statistics are an http(s):// URL."""
    if ours.a3_engine != "vllm-router":
        return None
    missing = [flag for dest, flag in (("a3_router_bin", "--a3-router-bin"),) + ROUTER_PORTS
               if getattr(ours, dest) is None]
    if missing:
        return "--a3-engine vllm-router needs %s" % ", ".join(missing)
    ports = [(flag, getattr(ours, dest)) for dest, flag in ROUTER_PORTS] + [("--a3-admin-port", ours.a3_admin_port)]
    for index, (flag, port) in enumerate(ports):
        for other, other_port in ports[index + 1:]:
            if port == other_port:
                return "%s and %s are both %d: the router's ports and the admin listener's must differ" % (
                    flag, other, port)
    stats = ours.a3_edge_stats
    if stats is not None and not (stats.startswith("http://") or stats.startswith("https://")):
        return "--a3-edge-stats must be an http:// or https:// URL, got %s" % stats
    return None


def router_port_conflict(ours, public_port):
    """Why a router port (vllm-router engine) is the public listener's (--port), or None."""
    if ours.a3_engine != "vllm-router":
        return None
    for dest, flag in ROUTER_PORTS:
        if getattr(ours, dest) == int(public_port):
            return ("%s %d is the public listener's port (--port %s): the router's ports and the listeners' must "
                    "differ" % (flag, getattr(ours, dest), public_port))
    return None


def wants_help(rest):
    return any(arg in ("-h", "--help") for arg in rest)


def listener_conflict(public_host, public_port, admin_host, admin_port):
    """Why the admin listener cannot be where it is asked to be (the public one's port, on an address that is
    or may be the same: a wildcard, a name, the same address), or None."""
    if int(public_port) != int(admin_port):
        return None
    hosts = [str(public_host).strip("[]"), str(admin_host).strip("[]")]
    if all(_ip_literal(h) and h not in ("0.0.0.0", "::") for h in hosts) and hosts[0] != hosts[1]:
        return None
    return ("the admin listener %s:%s would share the public listener's port (--host %s --port %s): give "
            "--a3-admin-port another port" % (admin_host, admin_port, public_host, public_port))


def _ip_literal(host):
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
