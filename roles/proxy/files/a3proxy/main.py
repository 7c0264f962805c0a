# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""The command line entry of the wrapper (a3_proxy.py calls main())."""

import logging
import os
import sys

from . import UPSTREAM_FILE
from .auth import NO_SECRETS, load_secrets
from .cli import UsageError, build_parser, listener_conflict, router_port_conflict, split_argv, wants_help
from .health import backend_key

log = logging.getLogger("a3_proxy")


def _fail(prog, message):
    sys.stderr.write("%s: error: %s\n" % (prog, message))
    return 2


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = os.path.basename(sys.argv[0]) or "a3_proxy.py"
    try:
        ours, rest = split_argv(argv, prog)
    except UsageError as exc:
        build_parser(prog).print_usage(sys.stderr)
        return _fail(prog, exc)
    if wants_help(rest):
        build_parser(prog).print_help()
        print("\nThe options of %s follow.\n" % UPSTREAM_FILE)
    # the work directory: a3_proxy.py, this package and the upstream script side by side
    work_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = ours.a3_upstream_script or os.path.join(work_dir, UPSTREAM_FILE)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # the upstream prints its status: show it in docker logs now
    except (AttributeError, ValueError):
        pass
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "httpcore"):  # one line per probe and per forwarded request otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    if not os.path.isfile(script):
        return _fail(prog, "the upstream proxy script %s does not exist" % script)
    from .engine import load_upstream, upstream_args
    upstream = load_upstream(script)
    try:
        args = upstream_args(upstream, rest, prog)
    except ValueError as exc:  # the upstream's own check of the host and port counts
        return _fail(prog, exc)
    conflict = (listener_conflict(args.host, args.port, ours.a3_admin_host, ours.a3_admin_port)
                or router_port_conflict(ours, args.port))
    if conflict:
        return _fail(prog, conflict)
    secrets, warnings = NO_SECRETS, []
    if ours.a3_secrets_file:
        try:
            secrets, warnings = load_secrets(ours.a3_secrets_file)
        except (OSError, ValueError) as exc:
            return _fail(prog, "cannot use the secrets file: %s" % exc)
    for warning in warnings:
        log.warning("%s", warning)
    upstream.global_args = args
    from .apps import AdminApp, PublicApp
    from .server import run, serve
    log.info("%s %s: prefill %s, decode %s; public listener %s:%d, admin listener %s:%d; client keys: %s, "
             "admin token: %s, backend key: %s",
             "wrapping" if ours.a3_engine == "upstream" else "engine vllm-router, the backends from the arguments of",
             script,
             " ".join(backend_key(h, p) for h, p in args.prefiller_instances),
             " ".join(backend_key(h, p) for h, p in args.decoder_instances), args.host, args.port,
             ours.a3_admin_host, ours.a3_admin_port, len(secrets.api_keys) or "none",
             "set" if secrets.admin_token else "none", "set" if secrets.backend_api_key else "none")
    if ours.a3_engine == "vllm-router":
        # the router relays the completions: the upstream script parsed the arguments, its app does not run
        from .router import RouterCore
        core = RouterCore(args, ours, secrets)
    else:
        from .core import HonestProxy
        core = HonestProxy(upstream, ours, secrets)
    listeners = [(PublicApp(core, ours, secrets.api_keys), args.host, args.port),
                 (AdminApp(core, ours, secrets.admin_token), ours.a3_admin_host, ours.a3_admin_port)]
    return run(serve(core, listeners, ours.a3_header_timeout))
