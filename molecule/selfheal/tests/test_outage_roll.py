# -*- coding: utf-8 -*-
"""A rolling restart over the seed's layout (one DP group per side), accepted as an outage.

playbooks/rolling_restart.yml refuses a single-group side unless -e rolling_accept_outage=true. Accepted, it
drains the whole decode side while three clients send chat completions through the proxy: they must get
honest errors (the proxy's 503 with Retry-After, or a 5xx with an error body) while the side is down, never an
empty 200, a malformed answer or a hang, and real answers again once the roll is over."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
import faultsuite  # noqa: E402
import loadgen  # noqa: E402


def test_single_group_roll_with_accepted_outage_gives_honest_errors_only():
    assert faultsuite.health_problems() == []
    load = loadgen.Load(faultsuite.PROXY, faultsuite.MODEL, clients=3, timeout=60, max_duration=900, interval=0.2)
    load.start()
    assert load.wait_good(3, timeout=60)
    run = subprocess.run(["ansible-playbook", "playbooks/rolling_restart.yml", "-i", "inventories/sim", "--tags", "decode",
                          "-e", "rolling_accept_outage=true"], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                         check=False, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1"))
    assert load.wait_good(3, timeout=60), "no good answer after the roll"
    outcomes = load.stop()
    assert run.returncode == 0, run.stdout[-6000:]
    kinds = {}
    for o in outcomes:
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
    print("\naccepted-outage roll of the decode side: %s" % kinds)
    assert kinds.get(loadgen.HONEST_ERROR, 0) > 0, kinds  # the side was really down meanwhile
    assert set(kinds) <= {loadgen.GOOD, loadgen.HONEST_ERROR}, [o.as_dict() for o in outcomes if o.kind not in (
        loadgen.GOOD, loadgen.HONEST_ERROR)][:5]
    assert any(o.kind == loadgen.HONEST_ERROR and o.status == 503 and o.retry_after for o in outcomes), kinds
    deadline = time.monotonic() + 60
    while faultsuite.health_problems() and time.monotonic() < deadline:
        time.sleep(2)
    assert faultsuite.health_problems() == []
