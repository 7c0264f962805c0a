# -*- coding: utf-8 -*-
"""Rolling restart of the GLM-5 layout in independent DP groups (playbooks/rolling_restart.yml).

The converged cluster runs layout.yml: two prefill groups (one node each, two instances per node) and two
decode groups (one node each, four instances per node), and two proxies (proxies.yml). While three clients send
chat completions through p0's proxy and two through p1's, the roll drains, restarts, checks and puts back each group
in turn, in both proxies. Every request must get a
real answer (no error of any kind, no empty 200), and every engine process must be a new one afterwards.
A roll over a side with a single DP group is refused before anything is touched. Then an image upgrade
takes the same path under load (to an image made from a patched container, so every patch of the new
tag is reported as already there and none is applied), and teardown, asked without confirmation, removes
nothing, and confirmed, removes the deployment but keeps the model, etcd's data and Prometheus' data.
The numbers go to .cache/rolling.json and are printed."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
import faultsuite  # noqa: E402
import loadgen  # noqa: E402

sys.path.insert(0, str(ROOT / "molecule" / "shared"))
from hostile_suite import load_vars  # noqa: E402
import scenario  # noqa: E402  (this directory's: the scenario's vars files)

HARDENED = "molecule/rolling/vars/hardened.yml"   # every protection on; its keys in Ansible Vault
VAULT_PASSWORD_FILE = scenario.VAULT_PASSWORD_FILE
# p0's proxy and p1's (vars/proxies.yml)
PROXIES = {h: "http://%s:8088" % faultsuite.NODE_IPS[h]
           for h in load_vars(ROOT / "molecule/rolling/vars/proxies.yml")["a3_proxy_hosts"]}
# faultsuite reads etcd (TLS with client certificates here) with the controller's copy of the etcd PKI
os.environ["A3SIM_ETCD_PKI"] = str(Path.home() / ".ascend-vllm-pd" / "127.30.0.11" / "etcd-pki")
# The clients carry the first client key, as the README's chat does with keys on.
API_KEY = load_vars(ROOT / HARDENED, VAULT_PASSWORD_FILE)["proxy_api_keys"][0]
NODES = ("p0", "p1", "d0", "d1")
INSTANCES = {"p0": 2, "p1": 2, "d0": 4, "d1": 4}


ROWS = {}


def playbook(*args, timeout=1800, name="rolling_restart.yml"):
    """playbooks/NAME with the scenario's vars files, as an operator runs it."""
    return scenario.playbook("playbooks/" + name, *args, timeout=timeout)


def roll_under_load(*args):
    """Run the roll while three clients send chat completions through the first proxy and two through each other
    one: (run, seconds, outcomes of all)."""
    loads = [loadgen.Load(url, faultsuite.MODEL, clients=3 if n == 0 else 2, timeout=60, max_duration=1500,
                          interval=0.2, api_key=API_KEY) for n, url in enumerate(PROXIES.values())]
    for load in loads:
        load.start()
    for load in loads:
        assert load.wait_good(2, timeout=60), "no good answers through %s before the roll" % load.base_url
    t0 = time.monotonic()
    run = playbook(*args)
    roll_s = time.monotonic() - t0
    time.sleep(3)  # requests after the roll count too
    return run, roll_s, [o for load in loads for o in load.stop()]


def record(name, run, roll_s, outcomes):
    kinds = {}
    for o in outcomes:
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
    ROWS[name] = {"roll_s": round(roll_s, 1), "requests": len(outcomes), "kinds": kinds,
                  "groups_drained": run.stdout.count("TASK [Drain the group in the proxy]")}
    (ROOT / ".cache").mkdir(exist_ok=True)
    (ROOT / ".cache" / "rolling.json").write_text(json.dumps(ROWS, indent=1))
    print("\n%s under load: %s" % (name, json.dumps(ROWS[name])))
    return kinds


def engine_pids(node):
    return set(faultsuite.engine_pids(node).split())


def test_a_single_group_side_is_refused_before_anything_changes():
    before = {n: engine_pids(n) for n in NODES}
    run = playbook("-e", "vllm_decode_dp_groups=1", timeout=600)
    assert run.returncode != 0, run.stdout[-3000:]
    text = " ".join(run.stdout.split())
    assert "decode has a single DP group" in text and "-e rolling_accept_outage=true" in text, run.stdout[-3000:]
    assert "Roll the prefill groups" not in run.stdout  # refused in the plan, before any group
    assert {n: engine_pids(n) for n in NODES} == before


def test_roll_every_group_under_load_without_a_failed_request():
    before = {n: engine_pids(n) for n in NODES}
    for node in NODES:  # the layout runs: one engine process per instance
        assert len(before[node]) == INSTANCES[node], (node, before[node])
    run, roll_s, outcomes = roll_under_load()
    assert run.returncode == 0, run.stdout[-6000:]
    kinds = record("rolling restart", run, roll_s, outcomes)
    failed = [o.as_dict() for o in outcomes if o.kind != loadgen.GOOD]
    assert not failed, failed[:5]
    assert kinds.get(loadgen.GOOD, 0) >= 20, kinds
    assert ROWS["rolling restart"]["groups_drained"] == 4
    after = {n: engine_pids(n) for n in NODES}
    for node in NODES:  # every engine restarted: no process of before is left, the same count is back
        assert not (after[node] & before[node]) and len(after[node]) == INSTANCES[node], (node, before[node], after[node])
    assert faultsuite.health_problems() == []  # every rank, worker and the proxy healthy afterwards


def container_image(node):
    return faultsuite.node_sh(node, "docker inspect -f '{{.Config.Image}}' %s" % faultsuite.CONTAINER).stdout.strip()


def test_image_upgrade_rolls_group_by_group_without_a_failed_request():
    old = container_image("p0")
    tag = "v0.18.0-a3-up%d" % int(time.time())
    new = old.rsplit(":", 1)[0] + ":" + tag
    # the "new release": the running, patched container of p0 as an image, pushed to the cluster's registry
    made = faultsuite.node_sh("p0", "docker commit %s %s >/dev/null && docker push %s >/dev/null"
                              % (faultsuite.CONTAINER, new, new), timeout=600)
    assert made.returncode == 0, made.stderr
    run, roll_s, outcomes = roll_under_load("-e", "container_image_tag=" + tag)
    assert run.returncode == 0, run.stdout[-6000:]
    kinds = record("image upgrade", run, roll_s, outcomes)
    failed = [o.as_dict() for o in outcomes if o.kind != loadgen.GOOD]
    assert not failed, failed[:5]
    assert kinds.get(loadgen.GOOD, 0) >= 20, kinds
    # the three nodes without the new image pulled it, all at once, before the first group drained
    first_drain = run.stdout.index("TASK [Drain the group in the proxy]")
    started = re.search(r"TASK \[ascend\.vllm_pd\.container : Start pulling the image in the background: \S+\][^\n]*\n((?:.+\n)+)",
                        run.stdout)
    assert started and started.start() < first_drain, run.stdout[-6000:]
    assert set(re.findall(r"^ok: \[(\w+)\]", started.group(1), re.M)) == set(NODES) - {"p0"}, started.group(1)
    waited = re.search(r"TASK \[ascend\.vllm_pd\.container : Wait for the background pull of \S+\][^\n]*\n((?:.+\n)+)", run.stdout)
    assert waited and waited.start() < first_drain, run.stdout[-6000:]
    assert set(re.findall(r"^changed: \[(\w+)\]", waited.group(1), re.M)) == set(NODES) - {"p0"}, waited.group(1)
    for node in NODES:
        assert container_image(node) == new, node
    # every node reports the three patches of the row as already in the new image, none is applied again
    assert run.stdout.count("    - already ") == 3 * len(NODES), run.stdout[-6000:]
    assert "    - applied " not in run.stdout
    assert faultsuite.health_problems() == []


VIP = load_vars(ROOT / "molecule/rolling/vars/ha.yml")["proxy_vip"]
ETCD_HOSTS = load_vars(ROOT / "molecule/rolling/vars/etcd.yml")["a3_etcd_hosts"]
# Bounds of the loss of a node (keepalived's defaults here: advert_int 1 s, so the other proxy host takes the address
# over about 3.6 s after the last advert; then the proxy ejects the lost node's backends on its probes: 3 failed
# probes 5 s apart, each failing within its 2 s timeout, and the router drops a backend 5 s after its last
# registration, so a request sent to the lost node's engines can fail until about 22 s after the loss).
MOVED_BOUND, FIRST_GOOD_BOUND, FAILURES_BOUND, BACK_BOUND = 10.0, 30.0, 30.0, 420


def test_losing_the_node_of_the_active_proxy_and_an_etcd_member_keeps_the_chat_answering():
    """The node that holds the virtual IP (an etcd member and a prefill group's node too) is lost for good, as in a
    power loss, under load sent to the virtual IP; the other proxy host takes the address over and the chat answers
    through it. Then the node comes back (its services start by themselves) and does not take the address back."""
    holders = [h for h in PROXIES if faultsuite.holds_address(h, VIP)]
    assert len(holders) == 1, holders
    lost = holders[0]
    heir = next(h for h in PROXIES if h != lost)
    assert lost in ETCD_HOSTS
    row = faultsuite.run_node_loss(lost, "http://%s:8088" % VIP, VIP, heir, clients=3, bound=60, api_key=API_KEY,
                                   observe=FAILURES_BOUND + 10)   # the load runs past the bound it is held to
    ROWS["lose the node of the active proxy"] = {k: v for k, v in row.items() if k != "details"}
    (ROOT / ".cache" / "rolling.json").write_text(json.dumps(ROWS, indent=1))
    print("\nlose node %s for good under load: %s" % (lost, json.dumps(row)))
    try:
        assert row["moved_after"] is not None and row["moved_after"] < MOVED_BOUND, row
        assert row["first_good_after"] is not None and row["first_good_after"] < FIRST_GOOD_BOUND, row
        assert row["good_after_move"] >= 2 * 3, row   # two good answers per client at least, after the move
        # the requests the lost node's engines took before the probes took them out failed honestly, and no later one
        assert row["last_failure_after"] is None or row["last_failure_after"] < FAILURES_BOUND, row
        assert row["empty_200"] == 0 and row["bad"] == 0, row
        # a request in flight on the lost node ends with the client's own timeout (nothing is left to answer it):
        # at most one per client
        assert row["timeout"] <= 3, row
    finally:
        subprocess.run(["docker", "start", faultsuite.NODE_PREFIX + lost], check=True, capture_output=True,
                       timeout=120)
        subprocess.run([faultsuite.CLUSTER, "link", lost, "up"], check=True, capture_output=True, timeout=120)
    t0 = time.monotonic()
    assert faultsuite.wait_healthy(BACK_BOUND) == []   # every rank, worker and the proxies, with no Ansible run
    print("%s healthy again %.0f s after its start" % (lost, time.monotonic() - t0))
    assert faultsuite.holds_address(heir, VIP) and not faultsuite.holds_address(lost, VIP)   # nopreempt


def node_has(node, path):
    return faultsuite.node_sh(node, "test -e %s" % path).returncode == 0


def units(node):
    out = faultsuite.node_sh(node, "systemctl list-unit-files --no-legend 'ascend-*' | awk '{print $1}'").stdout
    return set(out.split())


def test_teardown_asks_then_removes_the_deployment_and_keeps_the_data():
    refused = playbook(name="teardown.yml", timeout=600)
    assert refused.returncode != 0
    assert "teardown not confirmed: nothing was removed" in " ".join(refused.stdout.split()), refused.stdout[-3000:]
    assert "KEPT: the image" in refused.stdout and "/data/GLM-5.1-w8a8" in refused.stdout
    assert "ascend-vllm.service" in units("d1")
    run = playbook("-e", "confirm=yes", name="teardown.yml", timeout=900)
    assert run.returncode == 0, run.stdout[-6000:]
    for node in NODES:
        assert not units(node) & {"ascend-vllm.service", "ascend-vllm-canary.timer", "ascend-yr-worker.service"}, node
        assert faultsuite.node_sh(node, "docker ps -aq").stdout.strip() == "", node  # both containers gone
        assert not node_has(node, "/var/lib/ascend-vllm-pd"), node
        assert node_has(node, "/data/GLM-5.1-w8a8/config.json"), node  # the model stays
    assert not units("p0") & {"ascend-etcd.service", "ascend-prometheus.service"}
    assert node_has("p0", "/var/lib/ascend-etcd/member") and node_has("p0", "/var/lib/ascend-prometheus")
    assert not node_has("p0", "/etc/ascend-prometheus/prometheus.yml")
