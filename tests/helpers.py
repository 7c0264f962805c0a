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


class FreshFilters(object):
    """A filter plugin's FilterModule().filters() asked afresh at each use, as Ansible's loader asks it in each run.
    A mapping built once when a test module is imported would be built before mutation testing switches a mutant of
    filters() on, so no test could see a filter registered under a wrong name."""

    def __init__(self, filter_module):
        self._filter_module = filter_module

    def __getitem__(self, name):
        return self._filter_module().filters()[name]

    def __iter__(self):
        return iter(self._filter_module().filters())

    def __len__(self):
        return len(self._filter_module().filters())
