# -*- coding: utf-8 -*-
"""The deployment's Prometheus on the simulated cluster (role monitoring with monitoring_prometheus_install):
every target up, every Grafana panel query valid and answered with series, the datasystem workers' registration
exported, and an engine group that is stopped fires A3EngineRankDown in Prometheus. Runs after test_faults.py on
the same cluster; the last test stops the decode engines and brings them back the operator's way."""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from sim_run import ROOT, play

DASHBOARD = ROOT / "roles" / "monitoring" / "files" / "ascend-vllm-pd-dashboard.json"
IPS = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
PROM = "http://127.30.0.11:9090"
PROXY = "http://127.30.0.11:8088"
# vllm: one rank per node; etcd and the proxy on p0 (its /metrics on the admin listener, 127.0.0.1:8089). The label
# instance names the inventory host, the scrape URL its business IP (the admin listener's loopback for the proxy).
TARGETS = {("vllm", n + ":6700", "http://%s:6700/metrics" % ip) for n, ip in IPS.items()} | {
    ("etcd", "p0:2379", "http://127.30.0.11:2379/metrics"), ("proxy", "p0:8089", "http://127.0.0.1:8089/metrics")}
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url, timeout=15):
    with _opener.open(url, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with _opener.open(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def query(expr):
    return get(PROM + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))


def wait_for(predicate, timeout, step=2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def targets():
    return get(PROM + "/api/v1/targets?state=active")["data"]["activeTargets"]


def test_every_target_is_up_with_its_labels():
    def all_up():
        active = targets()
        return active if len(active) == len(TARGETS) and all(t["health"] == "up" for t in active) else None
    active = wait_for(all_up, timeout=60) or targets()
    assert {(t["labels"]["component"], t["labels"]["instance"], t["scrapeUrl"]) for t in active} == TARGETS, active
    assert all(t["health"] == "up" for t in active), [(t["scrapeUrl"], t["health"], t["lastError"]) for t in active]
    ranks = {t["labels"]["host"]: (t["labels"]["side"], t["labels"]["dp_rank"]) for t in active
             if t["labels"]["component"] == "vllm"}
    assert ranks == {"p0": ("prefill", "0"), "p1": ("prefill", "1"), "d0": ("decode", "0"), "d1": ("decode", "1")}


def test_the_alert_rules_are_loaded():
    groups = get(PROM + "/api/v1/rules")["data"]["groups"]
    names = {r["name"] for g in groups for r in g["rules"]}
    assert {"A3EngineRankDown", "A3DPGroupIncomplete", "A3ProxyNoHealthyBackend", "A3NoForwardProgress",
            "A3TimeToFirstTokenHigh", "A3KVCacheNearlyFull", "A3ExternalPrefixCacheNoHits",
            "A3DatasystemWorkerNotRegistered", "A3EtcdDown", "A3RestartsHigh"} <= names, names
    assert all(r.get("health") == "ok" for g in groups for r in g["rules"]), groups


def test_every_datasystem_worker_is_exported_as_registered():
    def states():
        result = query('a3_proxy_ds_worker_registered{component="proxy"}')["data"]["result"]
        return {r["metric"]["worker"]: r["value"][1] for r in result}
    want = {"%s:18481" % ip: "1" for ip in IPS.values()}
    assert wait_for(lambda: states() == want, timeout=30) or states() == want, states()


def test_every_dashboard_panel_query_returns_series():
    # traffic first: chats through the proxy and one long prefix sent to both prefill instances (pool hits)
    for i in range(3):
        status, text = post(PROXY + "/v1/chat/completions", {"model": "glm-5.1", "max_tokens": 16, "messages": [
            {"role": "user", "content": "dashboard %d %d" % (i, time.time_ns())}]})
        assert status == 200 and json.loads(text)["usage"]["completion_tokens"] > 0, text
    prompt = "dash-%d " % time.time_ns() + " ".join("w%d" % i for i in range(1200))
    for ip in (IPS["p0"], IPS["p1"]):
        post("http://%s:6700/v1/completions" % ip, {"model": "glm-5.1", "prompt": prompt, "max_tokens": 1})
    time.sleep(12)  # two scrapes (monitoring_scrape_interval 5s in inventories/sim) after the traffic
    # Grafana's variables: every cluster ($cluster "All" = .*), a rate window of a few scrapes
    panels = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]
    empty, invalid, count = [], [], 0
    for panel in panels:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$cluster", ".*")
            count += 1
            try:
                answer = query(expr)
            except urllib.error.HTTPError as exc:  # 400: the query does not parse or evaluate
                invalid.append((panel["title"], expr, exc.read().decode()[:300]))
                continue
            if answer["status"] != "success":
                invalid.append((panel["title"], expr, answer))
            elif not answer["data"]["result"]:
                empty.append((panel["title"], expr))
    assert count >= 30 and not invalid, invalid
    assert not empty, "panel queries without series: %s" % empty


def test_stopped_decode_engines_fire_the_rank_down_alert_then_recover():
    def firing():
        alerts = get(PROM + "/api/v1/alerts")["data"]["alerts"]
        return {a["labels"]["host"] for a in alerts
                if a["labels"]["alertname"] == "A3EngineRankDown" and a["state"] == "firing"}
    assert firing() == set()
    rc, out = play("playbooks/stop.yml", "--tags", "vllm", "--limit", "d0,d1")
    assert rc == 0, out[-3000:]
    try:
        # monitoring_rank_down_for 15s + a scrape and an evaluation (5s each in inventories/sim)
        hosts = wait_for(lambda: firing() >= {"d0", "d1"} and firing(), timeout=90)
        assert hosts == {"d0", "d1"}, (hosts, get(PROM + "/api/v1/alerts"))
        alert = [a for a in get(PROM + "/api/v1/alerts")["data"]["alerts"]
                 if a["labels"]["alertname"] == "A3EngineRankDown" and a["labels"]["host"] == "d1"][0]
        assert alert["labels"]["side"] == "decode" and alert["labels"]["severity"] == "critical", alert
        assert re.search(r"journalctl -u ascend-vllm", alert["annotations"]["runbook"]), alert
    finally:
        rc, out = play("site.yml", "--tags", "vllm_decode", "--limit", "d0,d1,p0")
    assert rc == 0, out[-3000:]
    assert wait_for(lambda: firing() == set(), timeout=60), firing()
