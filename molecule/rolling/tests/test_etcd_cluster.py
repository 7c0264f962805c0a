# -*- coding: utf-8 -*-
"""etcd as a 3-member cluster (vars/etcd.yml: a3_etcd_hosts p0, p1, d0) with TLS on (vars/hardened.yml): every
member runs and every client is given every member; under load, the loss of the member every list names first
costs no request and the proxy reads the workers' registrations through another member; a member whose data is
lost rejoins with a rerun of the etcd role. Runs first in this scenario (file order), on the converged cluster."""
from __future__ import annotations

import json
import os
import re
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

VAULT_PASSWORD_FILE = ROOT / "molecule/rolling/vault-pass.txt"
SECRETS = load_vars(ROOT / "molecule/rolling/vars/hardened.yml", VAULT_PASSWORD_FILE)
MEMBERS = load_vars(ROOT / "molecule/rolling/vars/etcd.yml")["a3_etcd_hosts"]
IPS = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
ENDPOINTS = ",".join("https://%s:2379" % IPS[m] for m in MEMBERS)
ADMIN = "http://127.0.0.1:8089"   # the proxy's admin listener (loopback of the proxy host, p0)
# etcdctl on a member, with that member's server certificate (it allows clientAuth, as the role's gate uses it)
ETCDCTL = ("/usr/local/bin/etcdctl --endpoints %s --cacert /etc/ascend-etcd/pki/ca.crt "
           "--cert /etc/ascend-etcd/pki/server.crt --key /etc/ascend-etcd/pki/server.key")


def etcdctl(node, args, endpoints=ENDPOINTS, timeout=60):
    out = faultsuite.node_sh(node, "%s %s" % (ETCDCTL % endpoints, args), timeout=timeout)
    assert out.returncode == 0, (node, args, out.stdout, out.stderr)
    return out.stdout


def members():
    """{name: (id, started)} from the member list, asked on p1 (a member, with its certificate)."""
    listed = json.loads(etcdctl("p1", "member list -w json"))["members"]
    return {m.get("name", ""): (m["ID"], bool(m.get("clientURLs"))) for m in listed}


def proxy_metrics():
    status, _headers, body = netns.in_node("p0", request, ADMIN + "/metrics",   # from the proxy host
                                           headers=bearer(SECRETS["proxy_admin_token"]), timeout=10)
    assert status == 200, status
    return {line.split(" ")[0]: line.split(" ")[-1] for line in body.decode().splitlines()
            if line and not line.startswith("#")}


def playbook(*args, timeout=900):
    """site.yml with the scenario's vars files, as an operator runs it (the checkout's ansible.cfg)."""
    return scenario.playbook("site.yml", *args, timeout=timeout)


def test_every_member_runs_and_every_client_is_given_every_member():
    assert MEMBERS == ["p0", "p1", "d0"]
    listed = members()
    assert sorted(listed) == sorted("etcd-" + m for m in MEMBERS), listed
    assert all(started for _id, started in listed.values()), listed
    health = faultsuite.node_sh(MEMBERS[0], "%s endpoint health" % (ETCDCTL % ENDPOINTS))
    assert health.returncode == 0 and (health.stdout + health.stderr).count("is healthy") == 3, health
    wanted = ",".join("%s:2379" % IPS[m] for m in MEMBERS)
    for node in IPS:
        script = faultsuite.node_sh(node, "cat /var/lib/ascend-vllm-pd/run_yr_worker.sh").stdout
        assert "--etcd_address %s " % wanted in script, (node, script)
    proxy = faultsuite.node_sh("p0", "cat /var/lib/ascend-vllm-pd/proxy.sh").stdout
    assert "--a3-etcd %s " % ENDPOINTS in proxy.replace("'", ""), proxy
    assert faultsuite.node_sh("d1", "systemctl cat ascend-etcd").returncode != 0   # no member, no unit


def test_the_loss_of_the_first_member_costs_no_request():
    """p0's etcd (first in every client's list) stopped for 30 s under load: every request answered, the proxy's
    read of the workers' registrations still good (through p1 or d0), the cluster still takes writes."""
    load = loadgen.Load(faultsuite.PROXY, faultsuite.MODEL, clients=3, timeout=60, max_duration=300, interval=0.2,
                        api_key=SECRETS["proxy_api_keys"][0])
    load.start()
    try:
        assert load.wait_good(3, timeout=60), "no good answers through the proxy before the fault"
        fault_at = time.time()
        assert faultsuite.node_sh("p0", "systemctl stop ascend-etcd").returncode == 0
        time.sleep(12)   # two probe rounds of the proxy (5 s each) and then some
        during = proxy_metrics()
        etcdctl("p1", "put /ascend-vllm-pd/test-lost-member p0-down",
                endpoints=",".join("https://%s:2379" % IPS[m] for m in MEMBERS[1:]))
        time.sleep(18)
        restored_at = time.time()
        assert faultsuite.node_sh("p0", "systemctl start ascend-etcd").returncode == 0
        time.sleep(5)
    finally:
        outcomes = load.stop()
    row = loadgen.summarize(outcomes, fault_at, name="etcd member p0 lost for 30 s", end=restored_at)
    print("\n" + json.dumps(row))
    assert during["a3_proxy_etcd_read_ok"] == "1", during
    assert row["good"] >= 30 and row["good"] == row["sent"], row
    assert etcdctl("p0", "get --print-value-only /ascend-vllm-pd/test-lost-member").strip() == "p0-down"
    etcdctl("p0", "del /ascend-vllm-pd/test-lost-member")


def test_a_member_whose_data_is_lost_rejoins_with_a_rerun():
    before = members()
    etcdctl("p0", "put /ascend-vllm-pd/test-rejoin kept")
    lost = faultsuite.node_sh("d0", "systemctl stop ascend-etcd && rm -rf /var/lib/ascend-etcd/member")
    assert lost.returncode == 0, lost
    t0 = time.monotonic()
    run = playbook("--tags", "etcd")
    took = time.monotonic() - t0
    assert run.returncode == 0, run.stdout[-6000:]
    print("\nrerun of --tags etcd after d0 lost its data: %.0f s" % took)
    after = members()
    assert set(after) == set(before) and all(started for _id, started in after.values()), after
    assert after["etcd-d0"][0] != before["etcd-d0"][0]          # removed and added anew
    assert {n: v for n, v in after.items() if n != "etcd-d0"} == {n: v for n, v in before.items() if n != "etcd-d0"}
    # d0 caught up: it answers the key written before its loss, by itself
    assert etcdctl("d0", "get --print-value-only /ascend-vllm-pd/test-rejoin",
                   endpoints="https://%s:2379" % IPS["d0"]).strip() == "kept"
    etcdctl("p0", "del /ascend-vllm-pd/test-rejoin")
    again = playbook("--tags", "etcd")
    recap = again.stdout.split("PLAY RECAP")[-1]
    assert again.returncode == 0 and set(re.findall(r"changed=([0-9]+)", recap)) == {"0"}, again.stdout[-3000:]
