# -*- coding: utf-8 -*-
"""The hostile-client suite (molecule/shared/hostile_suite.py) with every protection on (vars/hardened.yml): client
keys at the proxy, an admin token, the engines' key, etcd with TLS and client certificates, Prometheus with basic
auth. Besides the suite: without credentials, an engine, etcd and Prometheus refuse."""
from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "molecule" / "shared"))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
import hostile_suite  # noqa: E402
from hostile_suite import edge_settings, load_vars, request  # noqa: E402

# The suite's tests and fixtures, collected here with this module's `edge`.
globals().update({name: value for name, value in vars(hostile_suite).items()
                  if name.startswith("test_") or name in hostile_suite.FIXTURES})

HARDENED = "molecule/rolling/vars/hardened.yml"
ROUTER = "molecule/rolling/vars/router.yml"   # the suite's expectations follow proxy_engine (edge["engine"])
VAULT_PASSWORD_FILE = ROOT / "molecule/rolling/vault-pass.txt"
# The controller's copy of the etcd PKI the etcd role made (etcd_tls_local_dir's default for p0's business IP)
ETCD_PKI = Path.home() / ".ascend-vllm-pd" / "127.30.0.11" / "etcd-pki"
os.environ["A3SIM_ETCD_PKI"] = str(ETCD_PKI)   # sim/lib/faultsuite.py reads etcd with it


@pytest.fixture(scope="module")
def edge():
    settings = edge_settings(ROOT, HARDENED, ROUTER, vault_password_file=VAULT_PASSWORD_FILE)
    assert settings["engine"] == "vllm-router", settings
    assert settings["api_key"] and settings["admin_token"] and settings["engine_key"], settings
    return settings


def _tls_get(url, cert=None, timeout=5):
    import ssl
    import urllib.request
    ctx = ssl.create_default_context(cafile=str(ETCD_PKI / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(ETCD_PKI / ("%s.crt" % cert)), str(ETCD_PKI / ("%s.key" % cert)))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    with opener.open(url, timeout=timeout) as resp:
        return resp.status, resp.read()


def test_etcd_refuses_plain_http_and_a_client_without_a_certificate():
    import ssl
    import urllib.error
    with pytest.raises((OSError, urllib.error.URLError, http.client.HTTPException)):
        request("http://127.30.0.11:2379/health", timeout=5)
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
        _tls_get("https://127.30.0.11:2379/health")
    status, body = _tls_get("https://127.30.0.11:2379/health", cert="client-p0")
    assert status == 200 and json.loads(body)["health"] == "true", body


def test_prometheus_refuses_a_client_without_credentials():
    import base64
    settings = load_vars(ROOT / HARDENED, VAULT_PASSWORD_FILE)
    status, _unused, _body = request("http://127.30.0.11:9090/api/v1/targets")
    assert status == 401
    login = base64.b64encode(("%s:%s" % (settings["monitoring_prometheus_web_user"],
                                         settings["monitoring_prometheus_web_password"])).encode()).decode()
    status, _unused, body = request("http://127.30.0.11:9090/api/v1/targets", headers={"Authorization": "Basic " + login})
    assert status == 200, body[:300]
    active = json.loads(body)["data"]["activeTargets"]
    assert active and all(t["health"] == "up" for t in active), [(t["scrapeUrl"], t["lastError"]) for t in active]
