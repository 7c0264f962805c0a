# -*- coding: utf-8 -*-
"""Two proxies (vars/proxies.yml: a3_proxy_hosts p0, p1), each with the router engine's edge, with every protection
on: each answers a chat with real content, each probes every backend; under load through both, killing p0's edge
and proxy containers costs p1's clients nothing (p0's come back by themselves, and its clients get answers again).
Runs on the converged cluster, after test_faults_router.py (file order)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
sys.path.insert(0, str(ROOT / "molecule" / "shared"))
import faultsuite  # noqa: E402
import loadgen  # noqa: E402
import netns  # noqa: E402
from hostile_suite import bearer, load_vars, request  # noqa: E402
import scenario  # noqa: E402  (this directory's: the scenario's vars files)

SECRETS = load_vars(ROOT / "molecule/rolling/vars/hardened.yml", scenario.VAULT_PASSWORD_FILE)
HOSTS = load_vars(ROOT / "molecule/rolling/vars/proxies.yml")["a3_proxy_hosts"]
PROXIES = {h: "http://%s:8088" % faultsuite.NODE_IPS[h] for h in HOSTS}
# each proxy's admin listener: p0's on its loopback, p1's on its business IP (inventories/sim/hosts.yml)
ADMIN = {"p0": "http://127.0.0.1:8089", "p1": "http://127.30.0.12:8089"}
BACKENDS = {"prefill": 4, "decode": 8}   # vars/layout.yml: 2 + 2 prefill instances, 4 + 4 decode instances


def chat(url):
    body = {"model": faultsuite.MODEL, "messages": [{"role": "user", "content": "which proxy?"}], "max_tokens": 8}
    status, _headers, raw = request(url + "/v1/chat/completions", "POST", body, timeout=60,
                                    headers=bearer(SECRETS["proxy_api_keys"][0]))
    return status, json.loads(raw or b"{}")


def test_each_proxy_answers_with_real_content_and_probes_every_backend():
    for host, url in PROXIES.items():
        status, answer = chat(url)
        assert status == 200 and answer["choices"][0]["message"]["content"], (host, status, answer)
        assert answer["usage"]["completion_tokens"] > 0, (host, answer)
        status, _headers, raw = netns.in_node(host, request, ADMIN[host] + "/a3/backends",   # from the proxy host
                                              headers=bearer(SECRETS["proxy_admin_token"]), timeout=10)
        assert status == 200, (host, status)
        seen = json.loads(raw)
        for role, count in BACKENDS.items():
            healthy = [b["backend"] for b in seen if b["role"] == role and b["healthy"] and b["in_rotation"]]
            assert len(healthy) == count, (host, role, seen)


def test_losing_one_proxy_costs_the_other_ones_clients_nothing():
    survivor = HOSTS[1]
    load = loadgen.Load(PROXIES[survivor], faultsuite.MODEL, clients=2, timeout=30, max_duration=240, interval=0.2,
                        api_key=SECRETS["proxy_api_keys"][0])
    load.start()
    try:
        assert load.wait_good(2, timeout=60), "no good answers through %s before the fault" % survivor
        before = {c: faultsuite.started_at("p0", c) for c in (faultsuite.EDGE_CONTAINER, faultsuite.PROXY_CONTAINER)}
        fault_at = time.time()
        for container in before:   # the whole serving edge of p0: haproxy, then the wrapper and its router
            faultsuite.node_sh("p0", "kill -KILL $(docker inspect -f '{{.State.Pid}}' %s)" % container)
        back_after = None
        while time.time() - fault_at < 90:
            time.sleep(1)
            restarted = all(faultsuite.started_at("p0", c) not in ("", before[c]) for c in before)
            if restarted and faultsuite.http_status(PROXIES["p0"] + "/healthcheck") == 200:
                back_after = time.time() - fault_at
                break
        time.sleep(5)   # the survivor's clients keep sending after p0's is back
    finally:
        outcomes = load.stop()
    summary = loadgen.summarize(outcomes, fault_at, name="p0's proxy killed, clients of " + survivor)
    print("\n" + json.dumps({k: v for k, v in summary.items() if k != "details"}) + "\np0's proxy back after %s s"
          % (None if back_after is None else round(back_after, 1)))
    failed = [o.as_dict() for o in outcomes if o.kind != loadgen.GOOD]
    assert not failed, failed[:5]
    assert summary["good"] >= 10, summary
    assert back_after is not None, "p0's edge and proxy containers did not come back within 90 s"
