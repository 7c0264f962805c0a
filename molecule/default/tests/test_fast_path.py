# -*- coding: utf-8 -*-
"""site.yml's fast path on the converged cluster (after test_default.py; molecule's idempotence step ran the
fast path, its check-mode pass every role): a file changed on one node makes the next run a full one that names
the file and changes nothing but that file (the roles' own idempotence on the other three nodes), and the run
after that is fast again."""
from __future__ import annotations

import re

import testinfra

from sim_run import play, recap_changed

D1 = testinfra.get_host("docker://a3sim-d1")
HELPER = "/usr/local/libexec/ascend-vllm-pd/a3_supervise.py"
ROLE_TASK = re.compile(r"^TASK \[ascend\.vllm_pd\.(hugepages|container|patches|etcd|yuanrong|vllm|proxy|monitoring) ",
                       re.M)


def site(*args):
    rc, out = play("site.yml", *args)
    assert rc == 0, out[-4000:]
    return out


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
    assert recap_changed(out) == {"p0": 0, "p1": 0, "d0": 0, "d1": 1, "localhost": 0}, out[-3000:]
    assert D1.check_output("sha256sum %s", HELPER).split()[0] == before

    out = site()
    assert fast(out), out[-3000:]
    assert not ROLE_TASK.search(out)
    assert "TASK [ascend.vllm_pd.gate : Send the seed's test request through the proxy]" in out
    assert set(recap_changed(out).values()) == {0}
