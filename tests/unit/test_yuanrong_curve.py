# -*- coding: utf-8 -*-
"""The pool's CURVE keys (yuanrong_curve_zmq): the controller's key generator (roles/yuanrong/vars/main.yml,
yuanrong_curve_keygen_script) run as the role runs it, python -c with the directory, and the environment the smoke
check gives the SDK from the key files (yuanrong_curve_client_env)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VARS = yaml.safe_load((ROOT / "roles" / "yuanrong" / "vars" / "main.yml").read_text())
SCRIPT = VARS["yuanrong_curve_keygen_script"]

x25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.x25519")
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_decode(text: str) -> bytes:
    out = b""
    for i in range(0, len(text), 5):
        value = 0
        for char in text[i:i + 5]:
            value = value * 85 + Z85.index(char)
        out += value.to_bytes(4, "big")
    return out


def _run(folder: Path, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), *extra], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_z85_is_the_zeromq_encoding():
    namespace: dict = {}
    exec(SCRIPT.split("folder, check =")[0], namespace)  # the helper, without running the generator
    # the test vector of ZeroMQ RFC 32 (Z85)
    assert namespace["z85"](bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"


def test_generates_both_pairs_as_libzmq_writes_them(tmp_path):
    assert _run(tmp_path) == {"created": ["worker", "client"]}
    for name in ("worker", "client"):
        public, secret = (tmp_path / (name + ".key")).read_text(), (tmp_path / (name + ".key_secret")).read_text()
        assert len(public) == len(secret) == 40 and set(public + secret) <= set(Z85)
        # a key pair: the public key is the X25519 public key of the secret one
        key = x25519.X25519PrivateKey.from_private_bytes(_z85_decode(secret))
        derived = key.public_key().public_bytes_raw()
        assert derived == _z85_decode(public)
        assert stat.S_IMODE((tmp_path / (name + ".key_secret")).stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / (name + ".key")).stat().st_mode) == 0o644
    assert (tmp_path / "worker.key").read_text() != (tmp_path / "client.key").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client.key", "client.key_secret", "worker.key",
                                                          "worker.key_secret"]


def test_a_rerun_keeps_the_keys(tmp_path):
    _run(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert _run(tmp_path) == {"created": []}
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_missing_half_makes_that_pair_again_only(tmp_path):
    _run(tmp_path)
    worker = (tmp_path / "worker.key").read_text()
    (tmp_path / "client.key_secret").unlink()
    assert _run(tmp_path) == {"created": ["client"]}
    assert (tmp_path / "worker.key").read_text() == worker
    assert (tmp_path / "client.key_secret").exists()


def test_check_mode_creates_nothing(tmp_path):
    assert _run(tmp_path, "check") == {"created": ["worker", "client"]}
    assert list(tmp_path.iterdir()) == []


def test_the_smoke_checks_environment_carries_the_client_keys(tmp_path):
    """yuanrong_curve_client_env, rendered as the role renders it, then exec of the command after it."""
    _run(tmp_path)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda s: shlex.quote(str(s))
    snippet = env.from_string(VARS["yuanrong_curve_client_env"]).render(yuanrong_curve_dir=str(tmp_path))
    show = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('DATASYSTEM_')}))"
    done = subprocess.run(["sh", "-c", snippet + '; exec "$@"', "sh", sys.executable, "-c", show],
                          capture_output=True, text=True, check=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if not k.startswith("DATASYSTEM_")})
    assert json.loads(done.stdout) == {
        "DATASYSTEM_CLIENT_PUBLIC_KEY": (tmp_path / "client.key").read_text(),
        "DATASYSTEM_CLIENT_PRIVATE_KEY": (tmp_path / "client.key_secret").read_text(),
        "DATASYSTEM_SERVER_PUBLIC_KEY": (tmp_path / "worker.key").read_text(),
    }
    for key_file in tmp_path.iterdir():  # read from the files: no key in the command itself
        assert key_file.read_text() not in snippet
