# -*- coding: utf-8 -*-
"""playbooks/collect.yml end to end on this machine, through ansible-playbook (a process of its own: kept out of
tests/unit, whose suites the mutation runs use, since a module run by ansible-playbook cannot see a mutation run's
configuration). The module's own logic is tested in tests/unit/plugins/modules/test_support_bundle.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
M = "[REDACTED]"
KEY = "sk-engine-key-123456"
TOKEN = "admin-tok-987654"


def members(path):
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None, m.mode) for m in tar.getmembers()}


@pytest.mark.skipif(not (Path(sys.executable).parent / "ansible-playbook").exists(),
                    reason="ansible-playbook not beside this python (run ./setup.sh)")
def test_the_playbook_writes_the_archive_with_a_node_down(tmp_path):
    """collect.yml end to end on this machine: p0 is this machine (a local connection; its work directory a temporary
    one with secrets planted in its files), d0 a node that refuses the connection. The archive is written, d0 is in
    the manifest as unreachable, no secret value is in it, and the node's secret files were not read."""
    work = tmp_path / "work"
    (work / "supervise").mkdir(parents=True)
    (work / "vllm_log.log").write_text("VLLM_API_KEY=%s\nAuthorization: Bearer client-key-aaaa\nplain\n" % KEY)
    (work / "vllm_api_key").write_text(KEY)
    (work / "proxy-secrets.json").write_text('{"admin_token": "%s"}' % TOKEN)
    (work / "start_vllm.sh").write_text("launch --token %s\n" % TOKEN)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({
        "prefill": {"hosts": {"p0": {"ansible_connection": "local", "a3_business_ip": "127.0.0.1", "a3_nic_name": "lo"}}},
        "decode": {"hosts": {"d0": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh",
                                    "ansible_timeout": 3, "a3_business_ip": "127.0.0.2", "a3_nic_name": "lo"}}},
        "all": {"vars": {"ansible_python_interpreter": sys.executable, "a3_host_work_dir": str(work),
                         "vllm_api_key": KEY, "proxy_admin_token": TOKEN, "proxy_api_keys": ["client-key-aaaa"]}}}))
    out = tmp_path / "out"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/collect.yml", "-i",
                           str(inventory), "-e", "support_bundle_dir=%s" % out, "-e", "support_bundle_hccn=false",
                           "-e", "support_bundle_timeout=10"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for secret in (KEY, TOKEN, "client-key-aaaa"):
        assert secret not in proc.stdout and secret not in proc.stderr
    archives = list(out.glob("a3-support-*.tar.gz"))
    assert len(archives) == 1
    found = members(archives[0])
    stem = archives[0].name[:-len(".tar.gz")]
    manifest = json.loads(found[stem + "/manifest.json"][0])
    assert manifest["hosts"]["d0"]["status"] == "unreachable"
    assert manifest["hosts"]["p0"]["status"] in ("collected", "partial")
    log = found[stem + "/p0/files" + str(work / "vllm_log.log")][0].decode()
    assert log == "VLLM_API_KEY=%s\nAuthorization: Bearer %s\nplain\n" % (M, M)
    assert found[stem + "/p0/files" + str(work / "start_vllm.sh")][0].decode() == "launch --token %s\n" % M
    assert stem + "/p0/files" + str(work / "vllm_api_key") not in found
    assert stem + "/p0/files" + str(work / "proxy-secrets.json") not in found
    statuses = {i["name"]: i["status"] for i in manifest["hosts"]["p0"]["items"]}
    assert statuses["files" + str(work / "proxy-secrets.json")] == "excluded"
    assert {"proxy/admin-a3-backends.json", "journal/ascend-etcd.service.log", "supervise/status.json"} <= set(statuses)
    everything = b"".join(data for data, _mode in found.values() if data)
    for secret in (KEY, TOKEN, "client-key-aaaa"):
        assert secret.encode() not in everything
