# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus scrape targets of the deployment, derived from the topology (roles/common's fact a3).

Pure functions, no Ansible imports: the filter plugin (plugins/filter/monitoring.py) and plain pytest
tests call these. The output is Prometheus file_sd: one JSON list of target groups per job, each group
{"targets": ["ip:port"], "labels": {...}}. Every group carries the labels the alert rules of the role
monitoring match on: component (vllm, etcd, proxy), side (prefill/decode: the side of the host the
target runs on), host (inventory name), instance (host:port, readable in alerts) and, for an engine
rank, dp_rank. A site's Prometheus reads the files with file_sd_configs; labels it sets itself (job)
stay its own.

What is scraped, and on which path (all plain HTTP, path /metrics):
  vllm   every engine rank: the API server of dp rank r listens on vllm_api_port + local rank and serves
         vLLM's PrometheusStatLogger (vllm:* names) on the same port
  etcd   the etcd host's client port (etcd serves /metrics on its client URLs)
  proxy  every proxy's admin listener (a3_proxy.py serves a3_proxy_* names there, not on the public proxy_port):
         proxy_admin_bind_host:proxy_admin_port, the proxy host's business IP when it binds every address; on
         the default loopback only a Prometheus on the proxy host reaches it (a3_proxy_hosts: one target per
         proxy, each from its own host's values)
The openYuanrong datasystem workers are not scraped: their observability data goes to log files only
(gflags log_monitor / log_monitor_exporter; the datasystem documents "harddisk" as the only exporter, it
writes resource.log under log_dir) and a worker serves no HTTP metrics endpoint. Whether a worker is
registered in etcd is not exported as a metric yet (see A3DatasystemWorkerNotRegistered in the role
monitoring's rules).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from ._topology import SIDES, WILDCARD

# job name -> file name (without .json) of its target file
JOBS = ("vllm", "etcd", "proxy")


class MonitoringError(ValueError):
    """The topology lacks what the targets need."""


def _hostport(ip, port):
    ip = str(ip)
    return ("[%s]:%d" % (ip, int(port))) if ":" in ip else ("%s:%d" % (ip, int(port)))


def _labels(topo, host, component, port, cluster, extra=None):
    me = topo["hosts"][host]
    labels = {"component": component, "side": me["side"], "host": host,
              "instance": "%s:%d" % (host, int(port))}
    if cluster:
        labels["cluster"] = str(cluster)
    labels.update(extra or {})
    return labels


def file_sd(topo: dict, proxy_port: int, cluster: str = "", proxy_address: str = "") -> dict:
    """{job: [target group, ...]} for the jobs of JOBS, from the derived topology.

    proxy_port/proxy_address: the proxy's admin listener, which serves its /metrics (proxy_admin_port and
    proxy_admin_bind_host; a wildcard or empty address means the proxy host's business IP). Neither is part of
    the topology; the etcd members and their ports are (etcd_members: one target group per member).
    cluster, when not empty, is added as the label cluster to every group (several deployments in one
    Prometheus)."""
    try:
        hosts = topo["hosts"]
        engines = []
        for side in SIDES:
            for host in topo["sides"][side]["hosts"]:
                me = hosts[host]
                extra = {}
                if len(topo["sides"][side].get("groups") or [None]) > 1:
                    # several DP groups on this side: dp_rank repeats per group; A3DPGroupIncomplete sums by dp_group
                    extra["dp_group"] = str(me["group"])
                for inst in me["instances"]:
                    engines.append({
                        "targets": [_hostport(me["business_ip"], inst["api_port"])],
                        "labels": _labels(topo, host, "vllm", inst["api_port"], cluster,
                                          dict(extra, dp_rank=str(inst["dp_rank"]))),
                    })
        proxy_hosts = topo.get("proxy_hosts") or [topo["proxy_host"]]
        admin_urls = {p["host"]: p["admin_url"] for p in topo.get("proxies") or []}
        members = topo["etcd_members"]
    except (KeyError, TypeError) as exc:
        raise MonitoringError("the topology lacks %s: pass the fact a3 of roles/common" % exc)
    if not members:
        raise MonitoringError("the topology names no etcd member (etcd_members is %r)" % (members,))
    for member in members:
        if member["host"] not in hosts:
            raise MonitoringError("the etcd host %r is not a host of the topology" % (member["host"],))
    for proxy_host in proxy_hosts:
        if proxy_host not in hosts:
            raise MonitoringError("the proxy host %r is not a host of the topology" % (proxy_host,))
    try:
        proxy_port = int(proxy_port)
    except (TypeError, ValueError):
        raise MonitoringError("proxy_port %r is not a port number" % (proxy_port,))

    def proxy_group(host):
        # the proxy's admin listener as the topology places it (its own host's values), else from the arguments
        if host in admin_urls:
            url = urlsplit(admin_urls[host])
            target, port = url.netloc, url.port
        else:
            target = _hostport(hosts[host]["business_ip"] if str(proxy_address or "") in WILDCARD else proxy_address,
                               proxy_port)
            port = proxy_port
        return {"targets": [target], "labels": _labels(topo, host, "proxy", port, cluster)}
    return {
        "vllm": engines,
        "etcd": [{"targets": [_hostport(hosts[m["host"]]["business_ip"], m["client_port"])],
                  "labels": _labels(topo, m["host"], "etcd", m["client_port"], cluster)} for m in members],
        "proxy": [proxy_group(h) for h in proxy_hosts],
    }


def dp_sizes(topo: dict) -> dict:
    """{side: number of engine ranks of one DP group} (what a complete DP group has; the rules compare with it).
    Every group of a side has the same size (validation)."""
    return {side: int(topo["sides"][side]["dp_size"]) for side in SIDES}


def ds_workers(topo: dict) -> list:
    """[{host, side, worker}] of every datasystem worker (its etcd key /datasystem/cluster/<worker>)."""
    out = []
    for side in SIDES:
        for host in topo["sides"][side]["hosts"]:
            out.append({"host": host, "side": side, "worker": topo["hosts"][host]["ds_worker_addr"]})
    return out
