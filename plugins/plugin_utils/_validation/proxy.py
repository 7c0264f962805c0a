# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the proxy role's values: the extra flags of the proxy script, the environment proxy.sh unsets, the
capacity of the serving edge (docs/capacity.md): every streamed token of the cluster passes through the proxy's one
process, and the proxies' virtual IP (proxy_vip, keepalived)."""
from __future__ import annotations

import collections
import ipaddress

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    Host, as_bool, as_int, check_env_names, check_flag_dict, reads)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.vllm_serve import merged_flags

# The proxy script's own arguments (roles/proxy/vars: proxy_upstream_args) and the wrapper's --a3-* ones.
PROXY_FLAGS = ("port", "host", "prefiller-hosts", "prefiller-ports", "decoder-hosts", "decoder-ports")
# The flags of vllm-router the wrapper sets itself (roles/proxy/files/a3proxy: the router's command line).
ROUTER_FLAGS = ("vllm-pd-disaggregation", "vllm-discovery-address", "host", "port", "prometheus-host",
                "prometheus-port", "prefill", "decode", "api-key", "enable-igw")

# What the proxy relays when every decode instance runs its max-num-seqs sequences at once: per_host is
# ((host, instances, max-num-seqs), ...) in inventory order, sequences the sum of instances x max-num-seqs.
RelayEstimate = collections.namedtuple("RelayEstimate", "per_host instances sequences tokens_per_sequence tokens_per_s")


@reads("proxy_unset_env")
def check_unset_env(h, ctx):
    check_env_names(h, "proxy_unset_env")


@reads("proxy_extra_args")
def check_extra_args(h, ctx):
    """On the proxy host."""
    check_flag_dict(h, "proxy_extra_args", "the proxy", "max-retries: 3", False,
                    lambda flag: "the role sets --%s itself (from the topology and the proxy_* variables): remove "
                    "it" % flag if flag in PROXY_FLAGS or flag.startswith("a3-") else None)


def _positive(value):
    number = as_int(value)
    return number if number is not None and number > 0 else None


def decode_max_num_seqs(name: str, hv: dict):
    """The decode engines' --max-num-seqs on one host (vllm_serve.merged_flags: vllm_decode_serve_args over
    vllm_serve_args_common, as the role combines them), or None: unset, null, false, a template or not a positive
    integer."""
    return _positive(merged_flags(Host(name, hv, [], [], specs={}), "decode").get("max-num-seqs", (None,))[0])


def relay_estimate(hosts: dict, decode_hosts: list, tokens_per_sequence):
    """Streamed tokens/s the proxy relays when every decode instance runs max-num-seqs sequences, each at
    tokens_per_sequence tokens/s: sum over the decode hosts of instances (vllm_decode_dp_size_local, else
    vllm_dp_size_local) x max-num-seqs, times tokens_per_sequence. hosts: {host: values} (the inventory dict's
    "hosts"). None when the layout does not tell: no decode host, or a host whose instance count or max-num-seqs is
    not a positive integer (the layout and serve-flag rules name those). Standard library only, no I/O."""
    per_host = []
    for name in decode_hosts:
        hv = hosts.get(name) or {}
        own = hv.get("vllm_decode_dp_size_local")
        instances = _positive(own if own is not None else hv.get("vllm_dp_size_local"))
        seqs = decode_max_num_seqs(name, hv)
        if instances is None or seqs is None:
            return None
        per_host.append((name, instances, seqs))
    if not per_host:
        return None
    sequences = sum(instances * seqs for _unused, instances, seqs in per_host)
    return RelayEstimate(tuple(per_host), sum(instances for _unused, instances, _seqs in per_host), sequences,
                         tokens_per_sequence, sequences * tokens_per_sequence)


def describe_layout(estimate, groups=1) -> str:
    """'8 decode instances (2 hosts x 4, 1 DP group) x max-num-seqs 64 x proxy_tokens_per_sequence 40' (each host's
    own numbers when they differ)."""
    counts = {instances for _unused, instances, _seqs in estimate.per_host}
    seqs = {s for _unused, _instances, s in estimate.per_host}
    if len(counts) == 1 and len(seqs) == 1:
        return "%d decode instances (%d hosts x %d, %d DP group%s) x max-num-seqs %d x proxy_tokens_per_sequence %d" % (
            estimate.instances, len(estimate.per_host), counts.pop(), groups, "" if groups == 1 else "s", seqs.pop(),
            estimate.tokens_per_sequence)
    hosts = ", ".join("%s %d x %d" % row for row in estimate.per_host)
    return ("%d decode instances x max-num-seqs per host (%s: %d sequences) x proxy_tokens_per_sequence %d"
            % (estimate.instances, hosts, estimate.sequences, estimate.tokens_per_sequence))


def router_engine(h) -> bool:
    """proxy_engine is vllm-router (haproxy + the Rust router relay the completions)."""
    return h.get("proxy_engine") == "vllm-router"


@reads("proxy_engine", "proxy_wrapper", "proxy_router_args", choices={"proxy_engine": ("vllm-router",)})
def check_engine(h, ctx):
    """On the proxy host: the router engine runs under the wrapper (its registrar, probes and admin listener)."""
    if not router_engine(h):
        return
    if as_bool(h.get("proxy_wrapper")) is False:
        h.error("proxy_engine", "vllm-router", "the wrapper (a3_proxy.py) starts the router and registers the "
                "healthy backends with it, but proxy_wrapper is false: set proxy_wrapper to true, or proxy_engine "
                "to upstream")
    check_flag_dict(h, "proxy_router_args", "vllm-router", "request-timeout-secs: 600", False, _router_flag_owner)


def _router_flag_owner(flag):
    """Why proxy_router_args may not set this router flag, or None when it may."""
    if flag == "policy":
        return "the role sets --policy from proxy_router_policy: set that instead (round_robin, cache_aware or random)"
    if flag in ROUTER_FLAGS:
        return "the role sets --%s itself (from the topology and the proxy_* variables): remove it" % flag
    return None


@reads("proxy_relay_capacity", "proxy_router_relay_capacity", "proxy_engine", "proxy_tokens_per_sequence",
       "vllm_dp_size_local", "vllm_decode_dp_size_local", "vllm_decode_dp_groups", "vllm_serve_args_common",
       "vllm_decode_serve_args")
def check_relay_capacity(h, ctx):
    """On the proxy host: the decode side's full streaming load against what the chosen engine relays
    (proxy_relay_capacity for the upstream script's one Python process, proxy_router_relay_capacity for
    haproxy + vllm-router). A value out of its bounds (at least 1) is the spec's error; a layout relay_estimate
    cannot read is not estimated (the layout and serve-flag rules name it)."""
    router = router_engine(h)
    variable = "proxy_router_relay_capacity" if router else "proxy_relay_capacity"
    capacity = _positive(h.get(variable))
    per_sequence = _positive(h.get("proxy_tokens_per_sequence"))
    decode = ctx.groups.get("decode") or []
    if capacity is None or per_sequence is None:
        return
    estimate = relay_estimate(ctx.hosts, decode, per_sequence)
    if estimate is None or estimate.tokens_per_s <= capacity:
        return
    groups = _positive((ctx.hosts.get(decode[0]) or {}).get("vllm_decode_dp_groups")) or 1
    if router:
        h.warn(variable, capacity, "%s = %d tokens/s at full load, above what haproxy and vllm-router relay "
               "(proxy_engine vllm-router): measure the relay on this proxy host with benchmarks/edge_bench.py (the "
               "collection's source repository) and set proxy_router_relay_capacity to what it reports, or reduce the "
               "layout (fewer decode instances or a lower max-num-seqs in vllm_decode_serve_args)"
               % (describe_layout(estimate, groups), estimate.tokens_per_s))
        return
    h.warn("proxy_relay_capacity", capacity, "%s = %d tokens/s at full load, above this relay capacity of the "
           "proxy's one process, which every streamed token passes through: the streams would slow down at the "
           "proxy, not at the engines: measure the relay on this proxy host with benchmarks/edge_bench.py (the "
           "collection's source repository) and set "
           "proxy_relay_capacity to the streamed tokens/s it reports, or reduce the layout (fewer decode instances "
           "or a lower max-num-seqs in vllm_decode_serve_args), or set proxy_engine to vllm-router, whose relay "
           "carries several times more (docs/capacity.md)" % (describe_layout(estimate, groups), estimate.tokens_per_s))


@reads("proxy_vip", "proxy_vip_prefix", "proxy_bind_host", "proxy_vrrp_router_id", "proxy_vrrp_password",
       "proxy_vrrp_advert_int", "a3_business_ip")
def check_vip(h, ctx):
    """On every proxy host, with proxy_vip set: an IP address of no host, two or more proxies to move between, a
    proxy that listens on it, a VRRP router id and password keepalived takes."""
    vip = h.get("proxy_vip")
    if vip in ("", None) or not isinstance(vip, str):
        return
    try:
        address = ipaddress.ip_address(vip)
    except ValueError:
        h.error("proxy_vip", vip, "set a free IP address of the business network, e.g. 10.0.0.100")
        return
    taken = [name for name, values in sorted(ctx.hosts.items()) if str(values.get("a3_business_ip")) == vip]
    if taken:
        h.error("proxy_vip", vip, "it is the business IP (a3_business_ip) of %s: set a free address of the business "
                "network, held by no host" % ", ".join(taken))
    if len(ctx.proxy_hosts()) < 2:
        h.error("proxy_vip", vip, "a virtual IP moves between proxies: set a3_proxy_hosts to two or more hosts")
    bind = h.get("proxy_bind_host")
    if isinstance(bind, str) and bind not in ("", "0.0.0.0", "::"):   # (the roles reach it on the business IP too)
        h.error("proxy_bind_host", bind, "the proxy would not take the requests sent to proxy_vip %s: set 0.0.0.0 "
                "(every address)" % vip)
    prefix = as_int(h.get("proxy_vip_prefix"))
    if prefix is not None and not 1 <= prefix <= address.max_prefixlen:
        h.error("proxy_vip_prefix", prefix, "set a prefix length from 1 to %d" % address.max_prefixlen)
    router_id = as_int(h.get("proxy_vrrp_router_id"))
    if router_id is not None and not 1 <= router_id <= 255:
        h.error("proxy_vrrp_router_id", router_id, "VRRP takes 1 to 255: set an id no other VRRP group of the "
                "network uses")
    password = h.get("proxy_vrrp_password")
    if isinstance(password, str) and len(password) > 8:
        h.errors.append("%s: proxy_vrrp_password has %d characters: VRRP PASS authentication carries 8 (keepalived "
                        "cuts the rest off): set at most 8" % (h.name, len(password)))
