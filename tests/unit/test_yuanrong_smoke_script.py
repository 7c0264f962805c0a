# -*- coding: utf-8 -*-
"""The KV pool smoke check's script (roles/yuanrong/vars/main.yml, yuanrong_sdk_script) run as the role runs it,
python -c with its arguments, against a fake yr.datasystem whose KVClient keeps keys in a file shared by the
processes, as the workers of the pool share them. Two processes, each the other's ring peer, start together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = yaml.safe_load((ROOT / "roles" / "yuanrong" / "vars" / "main.yml").read_text())["yuanrong_sdk_script"]

# The pool: one JSON file. FAKE_DS_FAIL_SET makes set raise (a worker that refuses writes); FAKE_DS_SET_DELAY
# delays this process's write (a peer that writes late). A missing key raises as the real client does.
FAKE_CLIENT = r'''
import json, os, time

class KVClient:
    def __init__(self, host, port):
        self.path = os.environ["FAKE_DS_POOL"]

    def init(self):
        pass

    def _load(self):
        try:
            with open(self.path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}

    def set(self, key, value):
        if os.environ.get("FAKE_DS_FAIL_SET"):
            raise RuntimeError("code: [RPC unavailable], msg: [worker not ready]")
        time.sleep(float(os.environ.get("FAKE_DS_SET_DELAY", "0")))
        pool = self._load()
        pool[key] = value
        tmp = self.path + ".%d" % os.getpid()
        with open(tmp, "w") as handle:
            json.dump(pool, handle)
        os.replace(tmp, self.path)

    def get(self, keys, convert_to_str=False):
        pool = self._load()
        if keys[0] not in pool:
            raise RuntimeError("code: [Key not found], msg: [Cannot get objects from worker]")
        return [pool[keys[0]]]
'''


def _fake_package(tmp_path: Path) -> Path:
    package = tmp_path / "fake" / "yr" / "datasystem"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text(FAKE_CLIENT)
    return tmp_path / "fake"


def _start(tmp_path, me, peer, token="t1", wait="5", **env):
    fake = tmp_path / "fake" if (tmp_path / "fake").exists() else _fake_package(tmp_path)
    environ = dict(os.environ, PYTHONPATH=str(fake), FAKE_DS_POOL=str(tmp_path / "pool.json"), **env)
    argv = [sys.executable, "-c", SCRIPT, "127.0.0.1:18481", "smoke_%s_%s" % (me, token), token,
            "smoke_%s_%s" % (peer, token), wait]
    return subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc):
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert len(lines) == 1, out
    return json.loads(lines[0])


def test_a_pair_reads_each_others_key_when_the_peer_writes_late(tmp_path):
    late = _start(tmp_path, "p1", "p0", FAKE_DS_SET_DELAY="1.0")
    early = _start(tmp_path, "p0", "p1")
    got_early, got_late = _result(early), _result(late)
    assert got_early["write"] == "ok" and got_early["read"] == "t1"
    assert "Key not found" in got_early["error"]  # it read before the peer wrote, then again
    assert got_late == {"write": "ok", "read": "t1", "error": None}


def test_a_node_alone_reads_its_own_key(tmp_path):
    assert _result(_start(tmp_path, "p0", "p0")) == {"write": "ok", "read": "t1", "error": None}


def test_a_peer_that_never_writes_ends_the_read_after_the_wait(tmp_path):
    started = time.monotonic()
    got = _result(_start(tmp_path, "p0", "d1", wait="1"))
    elapsed = time.monotonic() - started
    assert got["write"] == "ok" and got["read"] is None
    assert "Key not found" in got["error"]
    assert 1.0 <= elapsed < 10, elapsed


def test_a_failed_write_is_reported_and_nothing_is_read(tmp_path):
    got = _result(_start(tmp_path, "p0", "p0", FAKE_DS_FAIL_SET="1"))
    assert got["write"].startswith("RuntimeError: ") and "RPC unavailable" in got["write"]
    assert got["read"] is None and got["error"] is None


def test_an_old_token_is_not_this_runs_answer(tmp_path):
    _result(_start(tmp_path, "d0", "d0", token="old"))
    got = _result(_start(tmp_path, "p0", "d0", token="new", wait="0.5"))
    assert got["read"] is None  # the key names carry the token: the old run's key is never read
