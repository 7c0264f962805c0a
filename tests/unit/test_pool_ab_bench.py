# -*- coding: utf-8 -*-
"""playbooks/files/pool_ab_bench.py carries the proxy's client key to aiperf without putting it in any argv: aiperf's
CLI runs with its arguments read from stdin. A stand-in aiperf.cli records what it got and its own command line."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "playbooks" / "files" / "pool_ab_bench.py"
_spec = importlib.util.spec_from_file_location("pool_ab_bench", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

FAKE_CLI = """import json, os, sys
def app():
    with open(os.environ["RECORD"], "w") as fh:
        json.dump({"argv": sys.argv, "cmdline": open("/proc/self/cmdline", "rb").read().decode(errors="replace"),
                   "env": sorted(os.environ)}, fh)
    if "--output-artifact-dir" not in sys.argv:
        return 3
    # what cmd_run reads afterwards: aiperf's summary and per-request records, in its artifact directory
    with open("profile_export_aiperf.json", "w") as fh:
        json.dump({"time_to_first_token": {"p50": 1.0, "p90": 2.0, "p99": 3.0}}, fh)
    with open("profile_export.jsonl", "w") as fh:
        fh.write(json.dumps({"metrics": {"time_to_first_token": {"value": 1.0}}}) + "\\n")
    return 0
"""


@pytest.fixture
def fake_aiperf(tmp_path):
    (tmp_path / "pkg" / "aiperf").mkdir(parents=True)
    (tmp_path / "pkg" / "aiperf" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "aiperf" / "cli.py").write_text(FAKE_CLI)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"), RECORD=str(tmp_path / "record.json"))
    return env, tmp_path / "record.json"


def test_without_a_key_the_client_runs_as_before():
    assert bench.client_command(["/venv/bin/aiperf", "profile", "--url", "u"], "") == (
        ["/venv/bin/aiperf", "profile", "--url", "u"], None)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_the_key_reaches_aiperf_in_memory_only(fake_aiperf, tmp_path):
    env, record = fake_aiperf
    argv = ["/venv/bin/aiperf", "profile", "--model", "glm-5.1", "--url", "http://127.0.0.1:8088"]
    rc = bench.run_client(argv, "s3cret-key", env, str(tmp_path))
    assert rc == 3                                            # aiperf's exit status is the client's
    got = json.loads(record.read_text())
    assert got["argv"] == argv + ["--api-key", "s3cret-key"]  # what aiperf's CLI parses
    assert "s3cret-key" not in got["cmdline"]                 # what ps shows
    command, stdin = bench.client_command(argv, "s3cret-key", python=sys.executable)
    assert "s3cret-key" not in " ".join(command) and b"s3cret-key" in stdin


def test_the_key_file_is_read_stripped_and_a_bad_one_stops_the_arm(tmp_path):
    key = tmp_path / "proxy_api_key"
    key.write_text("k3y\n")
    assert bench.read_key(str(key)) == "k3y"
    assert bench.read_key("") == ""
    key.write_text("\n")
    with pytest.raises(SystemExit, match="holds no key"):
        bench.read_key(str(key))
    with pytest.raises(SystemExit, match="cannot read the proxy's client key"):
        bench.read_key(str(tmp_path / "missing"))


def test_an_arm_run_hands_the_file_key_to_aiperf(fake_aiperf, tmp_path, monkeypatch, capsys):
    """The whole `run` command: the key comes from $POOL_AB_API_KEY_FILE, aiperf gets it after its other arguments,
    and neither the printed command nor the client's environment holds it (or the file's name)."""
    env, record = fake_aiperf
    key = tmp_path / "proxy_api_key"
    key.write_text("s3cret-key\n")
    for name in ("PYTHONPATH", "RECORD"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("POOL_AB_API_KEY_FILE", str(key))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    counters = {"http://e/metrics": {"hits": 0.0, "queries": 0.0}}
    monkeypatch.setattr(bench, "snapshot", lambda urls: counters)
    bench.main(["run", "--label", "A", "--pool", "on", "--url", "http://127.0.0.1:8088", "--metrics", "http://e/metrics",
                "--out", str(tmp_path / "out"), "--tokenizer", str(tmp_path), "--model", "glm-5.1", "--ui", "none"])
    got = json.loads(record.read_text())
    assert got["argv"][-2:] == ["--api-key", "s3cret-key"]
    assert "s3cret-key" not in got["cmdline"]
    assert "POOL_AB_API_KEY_FILE" not in got["env"] and "HF_HUB_OFFLINE" not in got["env"]
    out = capsys.readouterr().out
    assert "s3cret-key" not in out and "--api-key <the key in %s>" % key in out
    assert json.loads((tmp_path / "out" / "A.json").read_text())["requests_ok"] == 1
