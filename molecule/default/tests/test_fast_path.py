# -*- coding: utf-8 -*-
"""site.yml's fast path on the converged cluster (after test_default.py; molecule's idempotence step ran the
fast path, its check-mode pass every role): a file changed on one node makes the next run a full one that names
the file and changes nothing but that file (the roles' own idempotence on the other three nodes), and the run
after that is fast again."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import testinfra

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
D1 = testinfra.get_host("docker://a3sim-d1")
HELPER = "/usr/local/libexec/ascend-vllm-pd/a3_supervise.py"
ROLE_TASK = re.compile(r"^TASK \[ascend\.vllm_pd\.(hugepages|container|patches|etcd|yuanrong|vllm|proxy|monitoring) ",
                       re.M)


def site(*args):
    proc = subprocess.run(["ansible-playbook", "-i", "inventories/sim", "site.yml", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=dict(os.environ, ANSIBLE_NOCOLOR="1"),
                          check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def changed(out):
    return {h: int(c) for h, c in re.findall(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)}


def said(out):
    """The output with the callback's line folding undone."""
    return re.sub(r"\s+", " ", out)


def fast(out):
    return len(re.findall(r"fast path: every node matches", said(out))) == 4


def test_a_changed_file_makes_a_whole_run_that_repairs_it_then_the_next_run_is_fast():
    before = D1.check_output("sha256sum %s", HELPER).split()[0]
    D1.check_output("echo '# edited by hand' >> %s", HELPER)
    out = site()
    assert not fast(out)
    assert re.search(r"full run: file %s: \w{12}, recorded %s" % (re.escape(HELPER), before[:12]), said(out)), out[-4000:]
    assert said(out).count("full run: this node matches the record of its last converge, another node does not") == 3
    assert {m.group(1) for m in ROLE_TASK.finditer(out)} == {
        "hugepages", "container", "patches", "etcd", "yuanrong", "vllm", "proxy", "monitoring"}
    # the helper rewritten, nothing else: the record is unchanged once the file is back
    assert changed(out) == {"p0": 0, "p1": 0, "d0": 0, "d1": 1, "localhost": 0}, out[-3000:]
    assert D1.check_output("sha256sum %s", HELPER).split()[0] == before

    out = site()
    assert fast(out), out[-3000:]
    assert not ROLE_TASK.search(out)
    assert "TASK [ascend.vllm_pd.gate : Send the seed's test request through the proxy]" in out
    assert set(changed(out).values()) == {0}
