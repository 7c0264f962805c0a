# -*- coding: utf-8 -*-
"""playbooks/teardown.yml lists what it removes and keeps, and removes nothing unless confirmed: run without
-e confirm=yes and without a terminal, it stops before any play that touches a node (the nodes here are
unreachable on purpose, so a task that tried would show UNREACHABLE)."""
from __future__ import annotations

import os
import re
import subprocess

import yaml

from helpers import ROOT, venv_bin

HOSTS = {
    "prefill": {"hosts": {"p0": {"a3_business_ip": "192.0.2.11"}, "p1": {"a3_business_ip": "192.0.2.12"}}},
    "decode": {"hosts": {"d0": {"a3_business_ip": "192.0.2.13"}, "d1": {"a3_business_ip": "192.0.2.14"}}},
}


def run_playbook(tmp_path, playbook, *extra):
    """ansible-playbook <playbook> against the four hosts, unreachable on purpose, with no terminal."""
    data = yaml.safe_load(yaml.safe_dump(HOSTS))
    for group in data.values():
        for hv in group["hosts"].values():
            hv.update(a3_nic_name="bond0", ansible_host="node.invalid")
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(data))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([venv_bin("ansible-playbook"), playbook, "-i", str(tmp_path / "hosts.yml"), *extra],
                          cwd=ROOT, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def teardown(tmp_path, *extra):
    return run_playbook(tmp_path, "playbooks/teardown.yml", *extra)


def test_without_confirmation_it_lists_and_removes_nothing(tmp_path):
    rc, out = teardown(tmp_path)
    assert rc != 0, out[-3000:]
    assert "teardown not confirmed: nothing was removed" in out, out[-3000:]
    assert "container yr_glm5; on p0 also the proxy container" in out, out[-3000:]
    assert "KEPT: the image quay.io/ascend/vllm-ascend:v0.18.0-a3" in out, out[-3000:]
    assert "the model /data/GLM-5.1-w8a8 (-e remove_model=true removes it)" in out, out[-3000:]
    assert "etcd data on p0 (-e remove_etcd_data=true removes it)" in out, out[-3000:]
    assert "UNREACHABLE" not in out and "Stop the proxy" not in out, out[-3000:]


def test_asked_removals_are_listed(tmp_path):
    rc, out = teardown(tmp_path, "-e", "remove_etcd_data=true", "-e", "remove_model=true")
    assert rc != 0 and "teardown not confirmed" in out, out[-3000:]
    assert "on p0: the etcd unit and its data directory" in out and "the model /data/GLM-5.1-w8a8" in out, out[-3000:]
    assert "(-e remove_model=true removes it)" not in out, out[-3000:]


def test_stop_resolves_each_side_outside_the_roles(tmp_path):
    # The engines' stop play picks vllm_prefill or vllm_decode per host before any role (and its defaults)
    # is loaded: with unreachable nodes it must get as far as trying them, not fail on an undefined name.
    _rc, out = run_playbook(tmp_path, "playbooks/stop.yml", "--tags", "vllm", "--limit", "d0,d1")
    assert "undefined" not in out, out[-3000:]
    # the hosts of one include are listed in the order their results came (d1 first on a busy machine)
    included = re.findall(r"included: ascend\.vllm_pd\.vllm_decode for (.+)", out)
    assert sorted(h for line in included for h in line.strip().split(", ")) == ["d0", "d1"], out[-3000:]
    assert "ascend.vllm_pd.vllm : Stop and disable" in out and "UNREACHABLE" in out, out[-3000:]
