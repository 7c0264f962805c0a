# -*- coding: utf-8 -*-
"""The deployed simulated cluster, checked from outside: real services, real answers."""
from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # etcd3 0.12 with protobuf >= 4

IPS = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
PROXY = "http://127.30.0.11:8088"
SEED_DEVICES = ["/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm"]
SEED_MOUNTS = ["/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/ascend_install.info",
               "/usr/local/sbin", "/etc/hccn.conf", "/home", "/mnt", "/tmp", "/data"]


def http(url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def node_log(host, path="/var/lib/ascend-vllm-pd/vllm_log.log", lines=40):
    return host.run("tail -n %d %s", lines, path).stdout


def test_etcd_is_healthy_and_every_worker_registered():
    import etcd3
    client = etcd3.client(host=IPS["p0"], port=2379)
    client.put("/ascend-vllm-pd/test", "ok")
    assert client.get("/ascend-vllm-pd/test")[0] == b"ok"
    keys = sorted(meta.key.decode().rsplit("/", 1)[-1] for _unused, meta in client.get_prefix("/datasystem/cluster/"))
    assert keys == sorted("%s:18481" % ip for ip in IPS.values()), keys


def test_container_runs_with_the_seed_devices_and_mounts(host):
    name = host.backend.get_hostname()
    info = json.loads(host.check_output("docker inspect yr_glm5"))[0]
    assert info["State"]["Running"], info["State"]
    devices = [d["PathOnHost"] for d in info["HostConfig"]["Devices"]]
    assert all(d in devices for d in SEED_DEVICES) and "/dev/davinci15" in devices, devices
    mounts = {m["Destination"]: m["Source"] for m in info["Mounts"]}
    for path in SEED_MOUNTS:
        assert mounts.get(path) == path, (name, path, mounts)
    assert mounts["/etc/localtime"] == "/usr/share/zoneinfo/Asia/Shanghai"
    assert info["HostConfig"]["NetworkMode"] == "host" and info["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"


@pytest.mark.parametrize("node", sorted(IPS))
def test_each_engine_rank_answers_health(node):
    status, _unused = http("http://%s:6700/health" % IPS[node], timeout=10)
    assert status == 200


def test_chat_through_the_proxy_has_content_and_usage():
    status, text = http(PROXY + "/v1/chat/completions", {"model": "glm-5.1", "messages": [
        {"role": "user", "content": "你好"}], "stream": False, "temperature": 0, "max_tokens": 256}, timeout=120)
    assert status == 200 and text, "empty body from the proxy: decode failed?"
    reply = json.loads(text)
    assert reply["choices"][0]["message"]["content"].strip()
    assert reply["usage"]["completion_tokens"] > 0


def _external_hits(ip):
    # prometheus_client's parser, the one the benchmarks and the unit tests use (a label value may hold "}")
    _unused, text = http("http://%s:6700/metrics" % ip, timeout=10)
    return sum(float(s.value) for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "vllm:external_prefix_cache_hits_total")


def test_long_prefix_hits_the_external_pool_on_the_other_prefill():
    prompt = "pool-check-%d " % time.time_ns() + " ".join("w%d" % i for i in range(1200))
    before = _external_hits(IPS["p1"])
    for ip in (IPS["p0"], IPS["p1"]):
        status, _unused = http("http://%s:6700/v1/completions" % ip,
                               {"model": "glm-5.1", "prompt": prompt, "max_tokens": 1, "temperature": 0}, timeout=120)
        assert status == 200
    after = _external_hits(IPS["p1"])
    assert after > before, "no external prefix cache hit on p1 (%s -> %s)" % (before, after)
