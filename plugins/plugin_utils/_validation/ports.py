# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the ports the deployment binds (roles/common's values, on the derived topology): every range within
65535, and no two ranges of one host overlapping (_topology.host_ports, the list preflight checks free too)."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import host_ports
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import reads


@reads("vllm_api_port", "vllm_<side>_kv_port")
def check_ranges_end(ctx):
    """Port ranges that run past 65535."""
    topo = ctx.topo
    for name, me in topo["hosts"].items():
        for inst in me["instances"]:
            if inst["api_port"] > 65535:
                ctx.errors.append("%s: vllm_api_port is %d: dp rank %d listens on %d, above 65535: set vllm_api_port "
                                  "to at most %d" % (name, me["vllm_start_port"], inst["dp_rank"], inst["api_port"],
                                                     65535 - me["dp_size_local"] + 1))
            if inst["kv_ports"][1] > 65535:
                setting = int(ctx.hosts[name]["vllm_%s_kv_port" % me["side"]])
                instances = topo["sides"][me["side"]].get("instances", me["dp_size"])
                ctx.errors.append("%s: vllm_%s_kv_port is %d: dp rank %d's Mooncake ports end at %d, above 65535: set "
                                  "vllm_%s_kv_port to at most %d" % (name, me["side"], setting, inst["dp_rank"],
                                                                     inst["kv_ports"][1], me["side"],
                                                                     65536 - instances * me["tp_size"]))


@reads("vllm_api_port", "vllm_dp_rpc_port", "vllm_<side>_kv_port", "yuanrong_worker_port", "etcd_client_port",
       "etcd_peer_port", "proxy_port", "proxy_admin_port", "proxy_engine", "proxy_router_base_port",
       choices={"proxy_engine": ("vllm-router",)})
def check_overlaps(ctx):
    for h in ctx.ordered:
        ranges = host_ports(h, ctx.topo, ctx.hosts[h])
        for i, (a1, b1, w1) in enumerate(ranges):
            for a2, b2, w2 in ranges[i + 1:]:
                if a1 <= b2 and a2 <= b1:
                    kind = "overlaps" if (a1 != b1 or a2 != b2) else "is the same port as"
                    ctx.errors.append("%s: %s [%d-%d] %s %s [%d-%d]: move one of them"
                                      % (h, w1, a1, b1, kind, w2, a2, b2))
