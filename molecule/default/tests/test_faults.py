# -*- coding: utf-8 -*-
"""Faults on the deployed simulated cluster (after test_default.py, on the same converged cluster).
Each test: break one thing, run the collection as an operator would, check the message (naming host
and cause) or the recovery, then repair. Runs in file order; later tests rely on earlier repairs."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import time

import testinfra

from sim_run import ROOT, play, recap_changed

sys.path.insert(0, str(ROOT / "sim" / "lib"))
import faultsuite  # noqa: E402  (the simulation's observation helpers)

NODES = {n: testinfra.get_host("docker://a3sim-%s" % n) for n in ("p0", "p1", "d0", "d1")}
IPS = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
HOST_VARS = ROOT / "inventories" / "sim" / "host_vars"


def in_container(node, cmd):
    return NODES[node].run("docker exec yr_glm5 bash -c %s", cmd)


def registered():
    out = NODES["p0"].check_output("etcdctl --endpoints %s:2379 get --prefix /datasystem/cluster/ --keys-only", IPS["p0"])
    return sorted(k.rsplit("/", 1)[-1] for k in out.split())


def wait_for(predicate, timeout=90, step=2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


ALL_WORKERS = sorted("%s:18481" % ip for ip in IPS.values())


def recap_failed(out):
    """{host: failed count} of the play recap."""
    found = re.findall(r"^(\w+)\s+: ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", out, re.M)
    return {host: int(failed) for host, failed in found}


def failure_of(host, out):
    """The text of host's failed task results ("fatal: [host]: FAILED! => ..." up to the next result, task or
    recap line), whitespace collapsed (the yaml result format folds long lines)."""
    parts = re.findall(r"^fatal: \[%s\]: FAILED! =>(.*?)(?=^(?:ok|changed|fatal|failed|skipping|included): \[|^TASK \[|"
                       r"^RUNNING HANDLER \[|^PLAY |\Z)" % re.escape(host), out, re.M | re.S)
    return re.sub(r"\s+", " ", " ".join(parts))


def worker_pid(node):
    return in_container(node, "pgrep -f -- -worker_address=%s:18481" % IPS[node]).stdout.strip()


def test_check_mode_names_the_restarts_a_change_would_cause_and_changes_nothing():
    pgids = {n: in_container(n, "cat /workspace/glm5-a3-large-ep/launcher.pgid").stdout.strip() for n in NODES}
    extra = {"vllm_env_extra": {"VLLM_ENGINE_READY_TIMEOUT_S": "60", "A3_PLAN_PROBE": "1"}}
    rc, out = play("site.yml", "--check", "--diff", "--tags", "vllm", "-e", json.dumps(extra))
    assert rc == 0, out[-3000:]
    # the yaml result format folds long message lines: compare with the whitespace collapsed
    plan = re.sub(r"\s+", " ", out[out.index("check mode plan:"):])
    assert "check mode plan: 4 service restart(s) would happen" in plan, plan[:3000]
    for node in ("p0", "p1"):
        assert re.search(r"%s: the prefill engines \(ascend-vllm.service\) would restart with their whole DP group "
                         r"\(p0, p1\): configuration changed on p0, p1" % node, plan), plan[:3000]
    for node in ("d0", "d1"):
        assert re.search(r"%s: the decode engines .* group \(d0, d1\): configuration changed on d0, d1; the prefill "
                         r"group restarts \(a pair restarts together\)" % node, plan), plan[:3000]
    assert "+export A3_PLAN_PROBE=\"1\"" in out, "the --diff of run_dp_template.sh is missing"
    # nothing happened: same launchers, and the script on the node does not carry the probe
    assert {n: in_container(n, "cat /workspace/glm5-a3-large-ep/launcher.pgid").stdout.strip() for n in NODES} == pgids
    assert "A3_PLAN_PROBE" not in NODES["p0"].check_output("cat /var/lib/ascend-vllm-pd/run_dp_template.sh")


def test_dead_worker_comes_back_by_itself_and_a_rerun_changes_nothing():
    old = worker_pid("p1")
    assert in_container("p1", "pkill -KILL -f -- -worker_address=%s:18481" % IPS["p1"]).rc == 0
    assert wait_for(lambda: worker_pid("p1") not in ("", old) and registered() == ALL_WORKERS, timeout=90), \
        (worker_pid("p1"), registered())
    journal = NODES["p1"].check_output("journalctl -u ascend-yr-worker --no-pager -n 40")
    assert "unplanned exit" in journal and "ended" in journal, journal
    rc, out = play("site.yml", "--tags", "yuanrong")
    assert rc == 0, out[-3000:]
    assert set(recap_changed(out).values()) == {0}, out[-3000:]


def test_etcd_restart_keeps_data_and_workers_reregister():
    NODES["p0"].check_output("etcdctl --endpoints %s:2379 put /ascend-vllm-pd/keep me", IPS["p0"])
    NODES["p0"].check_output("systemctl restart ascend-etcd")
    assert NODES["p0"].check_output("etcdctl --endpoints %s:2379 get --print-value-only /ascend-vllm-pd/keep",
                                    IPS["p0"]) == "me"
    assert wait_for(lambda: registered() == ALL_WORKERS, timeout=90), registered()
    rc, out = play("site.yml", "--tags", "etcd,yuanrong")
    assert rc == 0, out[-3000:]


def test_etcd_unreachable_names_both_hosts():
    NODES["p0"].check_output("systemctl stop ascend-etcd")
    try:
        rc, out = play("site.yml", "--tags", "yuanrong_run", "--limit", "d0,p0")
        assert rc != 0
        assert re.search(r"d0 cannot reach etcd at 127\.30\.0\.11:2379 on p0", out), out[-3000:]
    finally:
        NODES["p0"].check_output("systemctl start ascend-etcd")
    assert wait_for(lambda: registered() == ALL_WORKERS, timeout=90), registered()


def test_kv_port_already_bound_fails_early_with_advice():
    # d1's decode rank 1 uses kv ports 30116-30131 on 127.30.0.14: stop decode, take one, start decode.
    assert play("playbooks/stop.yml", "--tags", "vllm", "--limit", "d0,d1")[0] == 0
    holder = NODES["d1"].run("nohup python3 -c 'import socket,time; s=socket.socket(); s.bind((\"%s\", 30120)); "
                             "s.listen(); time.sleep(900)' >/dev/null 2>&1 & echo $!", IPS["d1"]).stdout.strip()
    try:
        assert wait_for(lambda: ":30120 " in NODES["d1"].run("ss -Hltn").stdout, timeout=10), "holder did not bind"
        start = time.monotonic()
        rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0")
        assert rc != 0 and time.monotonic() - start < 200, out[-3000:]
        assert "Address already in use" in out and "Mooncake kv ports" in out, out[-4000:]
        # The failure is d1's, and its message names the address and port the holder took (d1's own engine log
        # line, addr='tcp://127.30.0.14:30120'): not merely "d1" somewhere in a run limited to d0,d1,p0.
        assert recap_failed(out).get("d1", 0) >= 1, out[-3000:]
        d1_failure = failure_of("d1", out)
        assert "Address already in use" in d1_failure and "%s:30120" % IPS["d1"] in d1_failure, out[-4000:]
    finally:
        NODES["d1"].run("kill %s", holder)
    rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0")
    assert rc == 0, out[-3000:]


def test_wrong_dp_address_fails_with_the_faq_advice():
    HOST_VARS.mkdir(exist_ok=True)
    (HOST_VARS / "d1.yml").write_text("---\nvllm_dp_address: 127.30.0.12\n")   # p1, not d0
    # The group's master gives up after VLLM_ENGINE_READY_TIMEOUT_S: 20 s instead of the inventory's 60 for
    # this run (the restart it causes would happen anyway; the repair below restarts with the inventory's value).
    ready = json.dumps({"vllm_env_extra": {"VLLM_ENGINE_READY_TIMEOUT_S": "20"}})
    try:
        rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0", "-e", ready)
        assert rc != 0
        assert "the DP group did not form" in out and "--data-parallel-address" in out, out[-4000:]
        # (the yaml callback folds long lines: any whitespace between the words)
        assert re.search(r"DP group did not form: \d+/\d+ ranks joined \S+ within 20s", re.sub(r"\s+", " ", out)), out[-4000:]
    finally:
        (HOST_VARS / "d1.yml").unlink()
        HOST_VARS.rmdir()
    rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0")
    assert rc == 0, out[-3000:]


def test_missing_yuanrong_patch_is_named_by_the_patches_role():
    # Take the repository back to the image's commit on p1 and run the patch set without the backend patch.
    in_container("p1", "cd /vllm-workspace/vllm-ascend && git reset -q --hard v0.18.0")
    table = ('{"patches_table": {"0.18.0": [{"file": "0001-Bugfix-Fix-negative-local_cache_hit-in-P-D-disaggreg.patch", '
             '"repo": "/vllm-workspace/vllm", "purpose": "x"}]}}')
    rc, out = play("site.yml", "--tags", "patches", "--limit", "p1", "-e", table)
    assert rc != 0
    assert re.search(r"p1: vllm-ascend's backend_map .* without 'yuanrong'", out) and "AssertionError" in out, out[-3000:]
    rc, out = play("site.yml", "--tags", "patches", "--limit", "p1")
    assert rc == 0 and recap_changed(out)["p1"] > 0, out[-3000:]


def test_pythonhashseed_mismatch_fails_on_the_controller_before_any_node_changes():
    # Before validation knew the rule, the gate found it after the restart (no external pool hit on p1).
    pgids = {n: in_container(n, "cat /workspace/glm5-a3-large-ep/launcher.pgid").stdout.strip() for n in NODES}
    HOST_VARS.mkdir(exist_ok=True)
    (HOST_VARS / "p1.yml").write_text("---\nvllm_env_extra: {PYTHONHASHSEED: \"1\", VLLM_ENGINE_READY_TIMEOUT_S: \"60\"}\n")
    try:
        rc, out = play("site.yml", "--tags", "vllm,verify")
        assert rc != 0
        flat = re.sub(r"\s+", " ", out)
        assert "PYTHONHASHSEED (vllm_env_common + vllm_<side>_env + vllm_env_extra) differs between the hosts " \
               "(p0='0', p1='1', d0='0', d1='0')" in flat, out[-4000:]
        assert "nothing was changed on any node" in flat and "Engines, prefill then decode" not in out, out[-4000:]
        assert {n: in_container(n, "cat /workspace/glm5-a3-large-ep/launcher.pgid").stdout.strip() for n in NODES} == pgids
    finally:
        (HOST_VARS / "p1.yml").unlink()
        HOST_VARS.rmdir()
    rc, out = play("site.yml", "--tags", "vllm,verify")
    assert rc == 0, out[-3000:]


def ranks_healthy():
    return all(NODES[n].run("curl -s -o /dev/null -w '%%{http_code}' --max-time 3 http://%s:6700/health", ip).stdout
               == "200" for n, ip in IPS.items())


def test_container_restart_heals_by_itself_and_a_rerun_changes_nothing():
    started = NODES["d1"].check_output("docker inspect -f '{{.State.StartedAt}}' yr_glm5")
    NODES["d1"].check_output("docker restart yr_glm5")
    assert NODES["d1"].check_output("docker inspect -f '{{.State.StartedAt}}' yr_glm5") != started
    assert wait_for(lambda: ranks_healthy() and registered() == ALL_WORKERS, timeout=180), registered()
    rc, out = play("site.yml")
    assert rc == 0, out[-3000:]
    assert set(recap_changed(out).values()) == {0}, out[-3000:]


def test_planned_stop_stays_stopped_until_site_yml():
    rc, out = play("playbooks/stop.yml", "--tags", "vllm", "--limit", "d0,d1")
    assert rc == 0, out[-3000:]
    for node in ("d0", "d1"):
        assert NODES[node].run("systemctl is-enabled ascend-vllm").stdout.strip() == "disabled"
        assert NODES[node].run("systemctl is-active ascend-vllm-canary.timer").stdout.strip() == "inactive"
    time.sleep(20)   # longer than RestartSec plus a canary round: nothing brings them back
    for node in ("d0", "d1"):
        assert NODES[node].run("systemctl is-active ascend-vllm").stdout.strip() == "inactive"
        assert NODES[node].run("curl -s -o /dev/null -w '%%{http_code}' --max-time 3 http://%s:6700/health",
                               IPS[node]).stdout != "200"
    rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0")
    assert rc == 0, out[-3000:]
    assert wait_for(ranks_healthy, timeout=60)


def test_status_fits_one_screen():
    rc, out = play("playbooks/status.yml")
    assert rc == 0, out[-3000:]
    msg = out[out.index("Show the cluster"):]
    for node in IPS:
        assert re.search(r"\b%s\s+(prefill|decode)\s+%s\s+running" % (node, re.escape(IPS[node])), msg), msg[:3000]


def test_a_frozen_rank_is_named_as_the_member_that_holds_its_group_then_its_node_restarts_it():
    """SIGSTOP of d1's rank: d1's /health stops answering, d0's rank stalls with it (lockstep) while its /health stays
    200; d0's canary holds (no restart of its own) and status.yml names d1 as the member that holds the group. d1's
    canary timer is stopped meanwhile (its node "did not bring it back" yet), so the hold lasts while status.yml reads
    it; started again, d1's canary restarts d1's engines after vllm_down_grace, and the group serves again.
    The rule is for a rank that answered /health since its start, as d1's canary saw it: the freeze waits for that
    (the test before restarted d1's engines; a rank frozen before any canary round saw it serve counts as never
    served, and is restarted only after the start timeout)."""
    engine = faultsuite.ENGINE_PATTERN
    assert faultsuite.wait_healthy(60, problems_now=faultsuite.canary_unseen) == []
    before = in_container("d1", "pgrep -f -- '%s'" % engine).stdout.split()
    NODES["d1"].check_output("systemctl stop ascend-vllm-canary.timer")
    in_container("d1", "pkill -STOP -f -- '%s'" % engine)
    try:
        _frozen_rank_is_held_then_restarted(engine, before)
    finally:
        NODES["d1"].check_output("systemctl start ascend-vllm-canary.timer")
        in_container("d1", "pkill -CONT -f -- '%s'" % engine)
    journal = NODES["d1"].run("journalctl -u ascend-vllm-canary --no-pager -n 50").stdout
    assert "stopped serving: http://%s:6700 answered /health since this start" % IPS["d1"] in journal, journal
    assert "DP group held by http://%s:6700" % IPS["d1"] in NODES["d0"].run(
        "journalctl -u ascend-vllm-canary --no-pager -n 50").stdout


def _frozen_rank_is_held_then_restarted(engine, before):
    assert wait_for(lambda: "held" in faultsuite.canary_state("d0"), timeout=60, step=1), \
        NODES["d0"].run("journalctl -u ascend-vllm-canary --no-pager -n 20").stdout
    assert NODES["d0"].run("curl -s -o /dev/null -w '%%{http_code}' --max-time 3 http://%s:6700/health",
                           IPS["d0"]).stdout == "200"
    rc, out = play("playbooks/status.yml")
    assert rc == 0, out[-3000:]
    flat = " ".join(out.split())    # the yaml callback folds long lines
    assert re.search(r"HELD on d0 by http://%s:6700 since [0-9-]+ [0-9:]+: its ranks produce no token while that "
                     r"member fails /health" % re.escape(IPS["d1"]), flat), out[-3000:]
    NODES["d1"].check_output("systemctl start ascend-vllm-canary.timer")
    assert wait_for(lambda: in_container("d1", "pgrep -f -- '%s'" % engine).stdout.split() not in ([], before)
                    and ranks_healthy(), timeout=150)


def test_the_support_bundle_is_written_with_a_node_down(tmp_path):
    """playbooks/collect.yml with d1 paused (docker refuses to exec in it): one archive
    on the controller, every other node collected, d1 listed as unreachable with the reason, nothing left on the
    nodes."""
    subprocess.run(["docker", "pause", "a3sim-d1"], check=True, capture_output=True, timeout=60)
    try:
        rc, out = play("playbooks/collect.yml", "-e", "support_bundle_dir=%s" % tmp_path)
    finally:
        subprocess.run(["docker", "unpause", "a3sim-d1"], check=False, capture_output=True, timeout=60)
    assert rc == 0, out[-3000:]
    archives = list(tmp_path.glob("a3-support-*.tar.gz"))
    assert len(archives) == 1, out[-3000:]
    assert archives[0].stat().st_mode & 0o777 == 0o600
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        manifest = json.load(tar.extractfile("%s/manifest.json" % top))
    hosts = manifest["hosts"]
    # a paused container refuses docker exec: Ansible's docker connection reports the run on it as failed (over ssh,
    # a node that is down is unreachable); either way the manifest names it and says why, and nothing came from it
    assert hosts["d1"]["status"] in ("unreachable", "failed") and hosts["d1"]["reason"], hosts["d1"]
    assert not [n for n in names if n.startswith("%s/d1/" % top) and not n.endswith(("ERROR.txt", "UNREACHABLE.txt"))]
    for node in ("p0", "p1", "d0"):
        assert hosts[node]["status"] in ("collected", "partial"), hosts[node]
        assert "%s/%s/journal/ascend-vllm.service.log" % (top, node) in names
    assert "%s/p0/proxy/admin-a3-backends.json" % top in names
    assert "%s/d0/supervise/status.json" % top in names
    assert NODES["d0"].run("ls /tmp | grep -c a3-support || true").stdout.strip() in ("", "0")
