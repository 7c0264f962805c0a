# -*- coding: utf-8 -*-
"""Rolling restart of the GLM-5 layout in independent DP groups (playbooks/rolling_restart.yml).

The converged cluster runs layout.yml: two prefill groups (one node each, two instances per node) and two
decode groups (one node each, four instances per node). While three clients send chat completions through
the proxy, the roll drains, restarts, checks and puts back each group in turn. Every request must get a
real answer (no error of any kind, no empty 200), and every engine process must be a new one afterwards.
A roll over a side with a single DP group is refused before anything is touched. The numbers go to
.cache/rolling.json and are printed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
import faultsuite  # noqa: E402
import loadgen  # noqa: E402

LAYOUT = "molecule/rolling/layout.yml"
NODES = ("p0", "p1", "d0", "d1")
INSTANCES = {"p0": 2, "p1": 2, "d0": 4, "d1": 4}


def playbook(*args, timeout=1800):
    return subprocess.run(["ansible-playbook", "playbooks/rolling_restart.yml", "-i", "inventories/sim", "-e", "@" + LAYOUT,
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


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
    load = loadgen.Load(faultsuite.PROXY, faultsuite.MODEL, clients=3, timeout=60, max_duration=1500, interval=0.2)
    load.start()
    assert load.wait_good(3, timeout=60), "no good answers through the proxy before the roll"
    t0 = time.monotonic()
    run = playbook()
    roll_s = time.monotonic() - t0
    time.sleep(3)  # requests after the roll count too
    outcomes = load.stop()
    assert run.returncode == 0, run.stdout[-6000:]
    kinds = {}
    for o in outcomes:
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
    failed = [o.as_dict() for o in outcomes if o.kind != loadgen.GOOD]
    after = {n: engine_pids(n) for n in NODES}
    row = {"roll_s": round(roll_s, 1), "requests": len(outcomes), "kinds": kinds,
           "groups": "prefill 2 x (1 node, DP2 x TP8), decode 2 x (1 node, DP4 x TP4)",
           "drained": run.stdout.count("TASK [Drain the group in the proxy]")}
    (ROOT / ".cache").mkdir(exist_ok=True)
    (ROOT / ".cache" / "rolling.json").write_text(json.dumps(row, indent=1))
    print("\nrolling restart under load: %s" % json.dumps(row))
    assert not failed, failed[:5]
    assert kinds.get(loadgen.GOOD, 0) >= 20, kinds
    for node in NODES:  # every engine restarted: no process of before is left, the same count is back
        assert not (after[node] & before[node]) and len(after[node]) == INSTANCES[node], (node, before[node], after[node])
    for line in run.stdout.splitlines():  # each host changed something (its restart)
        if line.split(":")[0].strip() in NODES and "changed=" in line:
            assert " changed=0 " not in line, line
    assert faultsuite.health_problems() == []  # every rank, worker and the proxy healthy afterwards
