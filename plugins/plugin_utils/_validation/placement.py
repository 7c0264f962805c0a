# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values one deployment must share on every node: a host that sets another value breaks it (or, for a warning,
makes it inconsistent). The values that must agree within a side or a DP group are vllm_layout's."""
from __future__ import annotations

import json

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, reads, templated
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.vllm_env import merged_env

# (variable, why, error?, secret?)
SAME = (
    ("a3_etcd_host", "the topology takes the etcd host from the first prefill host's value only, so the other value "
     "is ignored where it is set", True, False),
    ("a3_etcd_hosts", "the topology takes the etcd members from the first prefill host's value only, so the other "
     "value is ignored where it is set", True, False),
    ("a3_proxy_host", "the topology takes the proxy host from the first prefill host's value only, so the other "
     "value is ignored where it is set", True, False),
    ("a3_proxy_hosts", "the topology takes the proxy hosts from the first prefill host's value only, so the other "
     "value is ignored where it is set", True, False),
    ("a3_ha", "the topology takes it from the first prefill host's value only, so the other value is ignored where "
     "it is set", True, False),
    ("etcd_client_port", "etcd listens on the etcd host's value, while every node checks etcd's reach on its own "
     "value before its worker starts", True, False),
    ("etcd_tls", "every worker and the proxy talk to the one etcd, which either takes TLS with client certificates "
     "or plain HTTP", True, False),
    ("proxy_port", "the proxy listens on the proxy host's value, while status.yml, the benchmark and the gate reach "
     "it with the value of the host they run on", True, False),
    ("proxy_admin_port", "the proxy's admin listener is on the proxy host's value, while the monitoring targets and "
     "the rolling restart use the value of the host they run on", True, False),
    ("proxy_vip", "keepalived on every proxy host holds and moves one address", True, False),
    ("proxy_vrrp_router_id", "the proxy hosts' keepalived elect the holder of proxy_vip in one VRRP group", True,
     False),
    ("proxy_vrrp_password", "the proxy hosts' keepalived refuse each other's adverts with another password", True,
     True),
    ("vllm_api_key", "the proxy, the canary and the gate send their own host's key to every engine, so the engines "
     "with another key answer 401", True, True),
    ("vllm_served_model_name", "the proxy passes the client's model name to both sides; a side that serves another "
     "name answers 404", True, False),
    ("vllm_kv_pool_backend", "every instance shares one KV pool", True, False),
    ("vllm_kv_pool_enabled", "some instances would use the KV pool and others not (a benchmark A/B of the pool "
     "measures neither arm); set it for all hosts", False, False),
    ("container_image_tag", "prefill and decode must run the same vllm-ascend (the KV transfer and the patch set)",
     False, False),
    ("yuanrong_package_version", "the workers form one datasystem cluster in etcd", False, False),
)


def _differs(ctx, values, label, why, is_error, what, secret=False):
    shown = {h: v for h, v in values.items() if v is not ABSENT and not templated(v)}
    if len({json.dumps(v, sort_keys=True, default=str) for v in shown.values()}) > 1:
        listed = "values not shown" if secret else ", ".join("%s=%r" % kv for kv in shown.items())
        msg = "%s: %s differs between the hosts (%s): %s; %s" % (", ".join(shown), label, listed, why, what)
        (ctx.errors if is_error else ctx.warnings).append(msg)


@reads(*[entry[0] for entry in SAME])
def check_same_everywhere(ctx):
    names = [h for h in ctx.ordered if h in ctx.hosts]
    for key, why, is_error, secret in SAME:
        _differs(ctx, {h: ctx.hosts[h].get(key, ABSENT) for h in names}, key, why, is_error,
                 "set one value for every host (group_vars/all)", secret)


@reads("vllm_env_common", "vllm_<side>_env", "vllm_env_extra")
def check_same_hash_seed(ctx):
    seeds = {}
    for h in ctx.ordered:
        if h in ctx.hosts and ctx.side_of.get(h):
            got = merged_env(ctx.hosts[h], ctx.side_of[h], ctx.specs).get("PYTHONHASHSEED")
            if got is not None:
                seeds[h] = str(got[0])
    _differs(ctx, seeds, "PYTHONHASHSEED (vllm_env_common + vllm_<side>_env + vllm_env_extra)",
             "vLLM seeds its KV block hashes from it, so engines with different seeds never find each other's blocks "
             "in the pool", True, "set the same value on every host (one value in vllm_env_common, none in host_vars "
             "or vllm_env_extra of one host)")
