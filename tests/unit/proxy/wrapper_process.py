# -*- coding: utf-8 -*-
"""The wrapper a3_proxy.py as a process, for the proxy's live tests: the fast suite's test_proxy_live.py (around
upstream_standin.py) and the sim stage's tests/sim/test_honest_proxy.py (around the real upstream script; it adds
this folder to its path). Standard library only, so it runs in either venv.

lay_out() puts the wrapper, its package and an upstream script side by side, as the role writes them into the
work directory; wrapper_argv() is the wrapper's command line there (the secrets, if any, in a 0600 file beside
it); Process runs a command in a process group of its own and stops it as systemd and docker stop do.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

FILES = Path(__file__).resolve().parents[3] / "roles" / "proxy" / "files"
LOCAL = "127.0.0.1"
UPSTREAM_NAME = "load_balance_proxy_server_example.py"


def lay_out(work, upstream):
    """a3_proxy.py, its package and the upstream script (upstream, a path) side by side in work."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(FILES / "a3_proxy.py", work / "a3_proxy.py")
    shutil.copytree(FILES / "a3proxy", work / "a3proxy", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(upstream, work / UPSTREAM_NAME)
    return work


def wrapper_argv(work, port, admin_port, prefills, decodes, *,  # pylint: disable=too-many-arguments
                 options=(), host=LOCAL, secrets=None):
    """(argv, admin headers): python a3_proxy.py with its public listener on host:port and its admin listener on
    127.0.0.1:admin_port, the backends ((host, port) pairs) and options; with secrets (the secrets file's content)
    written to work/proxy-secrets.json (0600), and the admin token's header when it has one."""
    argv = [sys.executable, "a3_proxy.py", "--port", str(port), "--host", host,
            "--prefiller-hosts", *[h for h, _unused in prefills],
            "--prefiller-ports", *[str(p) for _unused, p in prefills],
            "--decoder-hosts", *[h for h, _unused in decodes],
            "--decoder-ports", *[str(p) for _unused, p in decodes],
            "--a3-admin-host", LOCAL, "--a3-admin-port", str(admin_port), *options]
    admin_headers = {}
    if secrets is not None:
        path = Path(work) / "proxy-secrets.json"
        path.write_text(json.dumps(secrets))
        path.chmod(0o600)
        argv += ["--a3-secrets-file", str(path)]
        if secrets.get("admin_token"):
            admin_headers = {"authorization": "Bearer " + secrets["admin_token"]}
    return argv, admin_headers


def parse_metrics(text):
    """{series: value} of a Prometheus text exposition, read by prometheus_client's parser (the one parser the tests
    use); a series is written name{label="value",...} with the labels in the exposition's order."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join('%s="%s"' % item for item in sample.labels.items())
            out[sample.name + ("{%s}" % labels if labels else "")] = float(sample.value)
    return out


class Process:
    """argv in cwd as a process group of its own, its output in cwd/<name>.log. stop() sends the group SIGTERM
    (SIGKILL after timeout) and returns the exit status."""

    def __init__(self, argv, env, cwd, name):
        self.name = name
        self.log = Path(cwd) / f"{name}.log"
        self._out = open(self.log, "ab")  # pylint: disable=consider-using-with
        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            argv, env=env, cwd=cwd, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)

    def output(self):
        """What the process wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace")

    def _signal(self, sig):
        with contextlib.suppress(ProcessLookupError):  # the whole group has exited meanwhile
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout=10):
        """SIGTERM to the group (SIGKILL after timeout s); the exit status."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._out.close()
        return self.proc.returncode
