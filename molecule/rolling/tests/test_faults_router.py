# -*- coding: utf-8 -*-
"""The serving edge of proxy_engine vllm-router under faults (sim/lib/faultsuite.py: router_faults), with every
protection on: three clients with the first client key send chat completions through haproxy while a decode rank
dies, hangs or freezes, the proxy container (the wrapper and its router) or the edge container (haproxy) is killed,
or a decode node is cut off, and nobody repairs anything. Each fault must heal by itself within its bound, with no
empty 200, no 5xx without an error body and no client waiting into its timeout. Only the edge's own restart may
refuse connections, and only the proxy container's (the router's) may cut the streams it was relaying; new requests
meanwhile get 503 with Retry-After from haproxy.
Runs before the hostile suite and the rolls (file order), on the converged layout. The rows go to
.cache/faults-router.json and the table is printed at the end."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
sys.path.insert(0, str(ROOT / "molecule" / "shared"))
import faultsuite  # noqa: E402
from hostile_suite import load_vars  # noqa: E402

VAULT_PASSWORD_FILE = ROOT / "molecule/rolling/vault-pass.txt"
API_KEY = load_vars(ROOT / "molecule/rolling/vars/hardened.yml", VAULT_PASSWORD_FILE)["proxy_api_keys"][0]
# faultsuite reads etcd (TLS with client certificates here) with the controller's copy of the etcd PKI
os.environ["A3SIM_ETCD_PKI"] = str(Path.home() / ".ascend-vllm-pd" / "127.30.0.11" / "etcd-pki")
FAULTS = faultsuite.router_faults()
ROWS = []


@pytest.fixture(scope="module", autouse=True)
def table():
    assert load_vars(ROOT / "molecule/rolling/vars/router.yml")["proxy_engine"] == "vllm-router"
    yield
    print("\n" + faultsuite.save_rows(ROWS, ROOT / ".cache" / "faults-router.json"))


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_the_router_edge_heals_by_itself_under_load(fault):
    row = faultsuite.run_fault(fault, log=lambda m: print(m, flush=True), api_key=API_KEY)
    ROWS.append(row)
    # killing the edge refuses connections; killing the router cuts the streams it was relaying
    faultsuite.assert_row(row, fault, may_refuse="the edge" in fault.name or "the proxy" in fault.name)
