# -*- coding: utf-8 -*-
"""Paths and commands shared by the tests (tests/ is on sys.path through tests/conftest.py)."""
from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def venv_bin(name: str) -> str:
    """A command from the checkout's virtual environment (or the one running the tests)."""
    for candidate in (ROOT / ".venv" / "bin" / name, Path(sys.executable).parent / name):
        if candidate.exists():
            return str(candidate)
    return name


def loopback_server(handler):
    """Serve ``handler`` (a BaseHTTPRequestHandler class) on 127.0.0.1 in a thread: a generator for a fixture, which
    yields the base URL and shuts the server down after."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
