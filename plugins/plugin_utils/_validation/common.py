# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of roles/common's values: the prefill and decode groups, each node's business IP and NIC (the strings the
node's tools consume), the listen addresses, and the etcd and proxy hosts."""
from __future__ import annotations

import ipaddress

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import HA_ETCD_MEMBERS
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ABSENT, PLACEHOLDER_RE, as_bool, as_int, reads)

# Linux refuses an interface name longer than IFNAMSIZ - 1 = 15 bytes, '.', '..', or one with '/', ':' or white
# space (net/core/dev.c dev_valid_name); a quote would break the shell words and files the roles write it into.
NIC_MAX = 15
_NIC_BAD_CHARS = "/:'\"`"
NIC_EXAMPLE = "set it to the business NIC name (e.g. enp3s0, bond0)"


@reads()
def check_groups(ctx):
    for side in SIDES:
        if not ctx.groups.get(side):
            ctx.errors.append("inventory: group '%s' is missing or empty: add the %s hosts under "
                              "'%s:' in the inventory (the seed has two)" % (side, side, side))
    for h, sides in ctx.members.items():
        if len(sides) > 1:
            ctx.errors.append("%s: host is in both 'prefill' and 'decode': a node serves one side only, "
                              "remove it from one group" % h)


def _not_a_business_address(addr) -> str:
    """Why an address cannot be a node's business IP, or ''. Loopback addresses pass (the simulated cluster runs
    its nodes on 127.30.0.x, and Python counts ::1 as reserved)."""
    if addr.is_loopback:
        return ""
    if addr.is_unspecified:
        return "the unspecified address, which names no node"
    if addr.is_multicast:
        return "a multicast address, which no node owns"
    if addr.version == 4 and int(addr) == 0xFFFFFFFF:
        return "the broadcast address, which reaches every host of the link"
    if addr.is_reserved:
        return "a reserved address, which is not routed"
    return ""


@reads("a3_business_ip", types=("a3_business_ip",))
def check_business_ip(ctx, h, seen):
    ip = ctx.hosts.get(h, {}).get("a3_business_ip")
    if ip is None or str(ip).strip() == "":
        ctx.errors.append("%s: a3_business_ip is not set: set it to the node's business IP" % h)
    elif PLACEHOLDER_RE.search(str(ip)):
        ctx.placeholder_sink.append("%s: a3_business_ip is still the placeholder %r: set it to the node's business "
                                    "IP" % (h, ip))
    else:
        try:
            addr = ipaddress.ip_address(str(ip))
        except ValueError:
            ctx.errors.append("%s: a3_business_ip %r is not a valid IP address: set the node's business IP, "
                              "e.g. 10.0.0.11" % (h, ip))
            return
        why = _not_a_business_address(addr)
        if why:
            ctx.errors.append("%s: a3_business_ip %s is %s: set the node's own business IP, e.g. 10.0.0.11"
                              % (h, ip, why))
        else:
            seen.setdefault(str(ip), []).append(h)


def nic_problem(nic: str) -> str:
    """Why a string is no Linux interface name, or ''."""
    if len(nic.encode("utf-8")) > NIC_MAX:
        return "is %d characters long, Linux allows at most %d" % (len(nic), NIC_MAX)
    if nic in (".", ".."):
        return "is not a name Linux allows"
    if any(c.isspace() or c in _NIC_BAD_CHARS for c in nic):
        return "contains white space, '/', ':' or a quote, which no Linux interface name has"
    return ""


@reads("a3_nic_name", types=("a3_nic_name",))
def check_nic(ctx, h):
    nic = ctx.hosts.get(h, {}).get("a3_nic_name")
    if nic is None or str(nic).strip() == "":
        ctx.errors.append("%s: a3_nic_name is not set: %s" % (h, NIC_EXAMPLE))
    elif PLACEHOLDER_RE.search(str(nic)):
        ctx.placeholder_sink.append("%s: a3_nic_name is still the placeholder %r: set it to the business NIC name "
                                    "(e.g. enp3s0, bond0)" % (h, nic))
    elif nic_problem(str(nic)):
        ctx.errors.append("%s: a3_nic_name %r %s (HCCL, Gloo and preflight use it as an interface name): %s"
                          % (h, nic, nic_problem(str(nic)), NIC_EXAMPLE))


@reads("vllm_dp_address", types=("vllm_dp_address",))
def check_dp_address(ctx, h):
    override = ctx.hosts.get(h, {}).get("vllm_dp_address")
    if override:
        try:
            ipaddress.ip_address(str(override))
        except ValueError:
            ctx.errors.append("%s: vllm_dp_address %r is not a valid IP address: remove it (the group's first host "
                              "is used) or set an address of that host" % (h, override))


@reads()
def check_addresses(ctx):
    """Every node's business IP (valid, its own, a unicast address), NIC name and DP address override."""
    seen_ips = {}
    for h in ctx.ordered:
        check_business_ip(ctx, h, seen_ips)
        check_nic(ctx, h)
    for h in ctx.ordered:
        check_dp_address(ctx, h)
    for ip, hs in sorted(seen_ips.items()):
        if len(hs) > 1:
            ctx.errors.append("%s: a3_business_ip %s is used by %d hosts: every node needs its own business IP"
                              % (", ".join(hs), ip, len(hs)))


@reads("a3_business_ip", "a3_listen_address", "vllm_bind_host", "proxy_bind_host", "etcd_listen_address")
def check_listen_addresses(h, ctx):
    ip = h.hv.get("a3_business_ip")
    for key in ("a3_listen_address", "vllm_bind_host", "proxy_bind_host", "etcd_listen_address"):
        value = h.get(key)
        if value is ABSENT:
            continue
        try:
            addr = ipaddress.ip_address(str(value))
        except ValueError:
            h.error(key, value, "set an IP address: 0.0.0.0 (every address, the seed) or the node's "
                    "business IP (a3_business_ip)")
            continue
        # The roles reach every service through the business IP (health polls, etcd's advertised URL, the
        # proxy's address): a specific listen address other than that one is never reached.
        if not addr.is_unspecified and str(value) != str(ip) and ip and not PLACEHOLDER_RE.search(str(ip)):
            h.error(key, value, "the roles reach every service on the node's business IP (a3_business_ip), which "
                    "this address does not cover: set 0.0.0.0 or the node's business IP")


@reads("a3_etcd_host", "a3_proxy_host")
def check_service_hosts_named(ctx):
    for key, _what in (("a3_etcd_host", "etcd"), ("a3_proxy_host", "proxy")):
        named = {ctx.hosts.get(h, {}).get(key) for h in ctx.members} - {None, ""}
        for n in sorted(named, key=str):
            if n not in ctx.members:
                ctx.errors.append("all: %s is %r, which is not a host of the prefill or decode group: set it to "
                                  "one of %s or leave it empty (first prefill host)"
                                  % (key, n, ", ".join(ctx.ordered) or "the inventory hosts"))


def _check_host_list(ctx, key, single_key, what):
    """A list of hosts option (the first prefill host's value, as the topology reads it): hosts of the inventory,
    each once, not beside its single-host option. The hosts listed, each once ([] when not set)."""
    first, anchor = ctx.anchor()
    listed = (anchor or {}).get(key)
    if not isinstance(listed, (list, tuple)) or not listed:
        return []
    label = "%s: %s" % (first, key)
    if anchor.get(single_key):
        ctx.errors.append("%s is %r and %s is %r: the hosts are named in one place, so set %s alone (its first host "
                          "plays %s's part) and leave %s empty"
                          % (label, list(listed), single_key, anchor.get(single_key), key, single_key, single_key))
    seen = [str(h) for h in listed]
    twice = sorted({h for h in seen if seen.count(h) > 1})
    if twice:
        ctx.errors.append("%s names %s more than once: %s runs once per host, list each host once"
                          % (label, ", ".join(twice), what))
    for h in [h for h in dict.fromkeys(seen) if h not in ctx.members]:   # (ordered has the anchor at least)
        ctx.errors.append("%s names %r, which is not a host of the prefill or decode group: set hosts of %s"
                          % (label, h, ", ".join(ctx.ordered)))
    return list(dict.fromkeys(seen))


@reads("a3_etcd_hosts", "a3_etcd_host")
def check_etcd_members(ctx):
    """a3_etcd_hosts: hosts of the inventory, each once, not beside a3_etcd_host; an even count is warned about.
    (Each member's own ports: ports.check_overlaps.)"""
    hosts = _check_host_list(ctx, "a3_etcd_hosts", "a3_etcd_host", "an etcd member")
    count = len(hosts)
    if count and count % 2 == 0:
        ctx.warnings.append("%s: a3_etcd_hosts has %d members: etcd needs a majority (%d) to serve, so %d members "
                            "survive no more losses than %d do and fail more often; list %d or %d hosts"
                            % (ctx.anchor()[0], count, count // 2 + 1, count, count - 1, count - 1, count + 1))


@reads("a3_proxy_hosts", "a3_proxy_host")
def check_proxy_hosts(ctx):
    """a3_proxy_hosts: hosts of the inventory, each once, not beside a3_proxy_host; a single host is warned about
    (it is a3_proxy_host's job). (Each proxy's own ports: ports.check_overlaps.)"""
    hosts = _check_host_list(ctx, "a3_proxy_hosts", "a3_proxy_host", "a proxy")
    if len(hosts) == 1:
        ctx.warnings.append("%s: a3_proxy_hosts names one host (%s): one proxy is a3_proxy_host's setting; list two "
                            "or more hosts for a proxy that survives the loss of one" % (ctx.anchor()[0], hosts[0]))


@reads("a3_ha", "a3_etcd_hosts", "proxy_vip", "vllm_prefill_dp_groups", "vllm_decode_dp_groups")
def check_ha(ctx):
    """a3_ha (the first prefill host's value, as the topology reads it): enough hosts for its etcd members and
    proxies, a virtual IP to move; a DP group over several nodes is warned about (one node stops it whole)."""
    first, anchor = ctx.anchor()
    if anchor is None or not as_bool(anchor.get("a3_ha")):
        return
    hosts = len(ctx.ordered)
    if hosts < HA_ETCD_MEMBERS and not anchor.get("a3_etcd_hosts"):
        ctx.errors.append("%s: a3_ha is true with %d host(s): it runs etcd on %d hosts (a majority survives one loss): "
                          "add hosts, or leave a3_ha false" % (first, hosts, HA_ETCD_MEMBERS))
    if anchor.get("proxy_vip") in ("", None):
        ctx.errors.append("%s: a3_ha is true and proxy_vip is not set: clients reach the proxies on a virtual IP that "
                          "moves when a proxy host is lost: set proxy_vip to a free address of the business network"
                          % first)
    for side in SIDES:
        names = ctx.groups.get(side) or []
        groups = as_int(anchor.get("vllm_%s_dp_groups" % side))
        if groups is not None and len(names) > groups:
            ctx.warnings.append("%s: a3_ha is true and the %s side runs %d DP group(s) over %d hosts: losing one "
                                "node stops its whole group; set vllm_%s_dp_groups: %d (one group per node)"
                                % (first, side, groups, len(names), side, len(names)))
