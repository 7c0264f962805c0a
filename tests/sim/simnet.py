# -*- coding: utf-8 -*-
"""Loopback plumbing shared by the simulation's live tests (test_engine.py, test_honest_proxy.py) and
benchmarks/pool_ab_local.py: test addresses on lo, free ports, a clean environment for the processes they start,
and a vllm-ascend pool worker with the yuanrong backend registered."""
from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess

import pytest

POOL_WORKER_REL = "vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/pool_worker.py"
PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
             "ftp_proxy", "no_proxy", "NO_PROXY")
# Variables of this shell that would change what a simulated engine or the proxy does.
_STRIPPED = ("PYTHONHASHSEED", "HCCL_IF_IP", "HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "ASCEND_RT_VISIBLE_DEVICES",
             "DS_WORKER_ADDR", "VLLM_ASCEND_SRC", "PYTHONPATH", "VLLM_API_KEY", "OPENAI_API_KEY")


def loopback_addresses(ips):
    """Generator for a session fixture: add each of ips to lo as /32 (like sim/up does), yield them,
    remove the ones it added. Skips the test session when they cannot be added."""
    ip_cmd = shutil.which("ip")
    if not ip_cmd:
        pytest.skip("iproute2 `ip` not available to add test addresses to lo")
    present = subprocess.run([ip_cmd, "-o", "-4", "addr", "show", "dev", "lo"], capture_output=True,
                             text=True, check=False).stdout
    added = []
    for ip in ips:
        if f" {ip}/" in present:
            continue
        r = subprocess.run([ip_cmd, "addr", "add", f"{ip}/32", "dev", "lo"], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            for a in added:
                subprocess.run([ip_cmd, "addr", "del", f"{a}/32", "dev", "lo"], capture_output=True, check=False)
            pytest.skip(f"cannot add {ip}/32 to lo (need CAP_NET_ADMIN): {r.stderr.strip()}")
        added.append(ip)
    yield list(ips)
    for a in added:
        subprocess.run([ip_cmd, "addr", "del", f"{a}/32", "dev", "lo"], capture_output=True, check=False)


def free_port(ip="127.0.0.1"):
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def free_range(ip, count, lo=31000, hi=60000):
    """A base port such that base..base+count-1 are all free on ip."""
    rnd = random.Random()
    for _unused in range(200):
        base = rnd.randrange(lo, hi - count)
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind((ip, p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def clean_env(**extra):
    """This environment without proxies, A3SIM_* and the engine variables above, plus extra
    (a value of None removes the variable)."""
    env = {k: v for k, v in os.environ.items()
           if k not in PROXY_ENV and not k.startswith("A3SIM_") and k not in _STRIPPED}
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def pool_tree_with_yuanrong(vas_src, root):
    """Under root, a copy of vllm-ascend's pool_worker.py (from the source tree vas_src) with the yuanrong backend
    registered in its backend_map, as the seed's patch does, and a stand-in backend module. Returns root."""
    pw = root / POOL_WORKER_REL
    pw.parent.mkdir(parents=True, exist_ok=True)
    text = (vas_src / POOL_WORKER_REL).read_text()
    assert "backend_map = {" in text, "%s: no backend_map to register the yuanrong backend in" % (vas_src / POOL_WORKER_REL)
    text = text.replace("backend_map = {", 'backend_map = {\n    "yuanrong": {\n'
                        '        "name": "YuanrongBackend",\n        "path": "vllm_ascend.distributed.'
                        'kv_transfer.kv_pool.ascend_store.backend.yuanrong_backend",\n    },', 1)
    pw.write_text(text)
    (pw.parent / "backend").mkdir(exist_ok=True)
    (pw.parent / "backend" / "yuanrong_backend.py").write_text("class YuanrongBackend:\n    pass\n")
    return root
