# -*- coding: utf-8 -*-
"""Paths and commands shared by the tests (tests/ is on sys.path through tests/conftest.py)."""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

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


_RENDER = r'''
import json, os, sys, yaml
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([sys.argv[1]])
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
def trust(x):
    if isinstance(x, str):
        return trust_as_template(x)
    if isinstance(x, list):
        return [trust(i) for i in x]
    if isinstance(x, dict):
        return {k: trust(i) for k, i in x.items()}
    return x
files, cases, names = json.loads(sys.argv[2])
base = {}
for path in files:
    base.update(yaml.safe_load(open(path)))
results = []
for case in cases:
    templar = Templar(loader=DataLoader(), variables=trust(dict(base, **case)))
    results.append([templar.template(trust_as_template("{{ %s }}" % name)) for name in names])
print(json.dumps(results))
'''


def render_role_vars(var_files, cases, names):
    """For each case (a dict of variables), the values of ``names`` as ansible-core templates them over the YAML
    ``var_files`` (paths under the checkout, later files win) and the case: a list of lists. In a process of its
    own, with the checkout linked into .venv/collections as ascend.vllm_pd (./setup.sh): fails the test otherwise."""
    try:
        import ansible.template  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError as exc:
        pytest.fail("rendering role variables needs ansible-core in %s (%s): run ./setup.sh" % (sys.executable, exc),
                    pytrace=False)
    collections = ROOT / ".venv" / "collections"
    if not (collections / "ansible_collections" / "ascend" / "vllm_pd").exists():
        pytest.fail("the checkout is not linked into .venv/collections as ascend.vllm_pd: run ./setup.sh",
                    pytrace=False)
    spec = [[str(ROOT / f) for f in var_files], cases, names]
    out = subprocess.run([sys.executable, "-c", _RENDER, str(collections), json.dumps(spec)],
                         capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)
