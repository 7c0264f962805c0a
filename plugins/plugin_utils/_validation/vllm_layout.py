# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the engines' layout (roles/common's values the topology derives from): the numbers it reads, the
values every host of a side or of a DP group must share, how the hosts split into DP groups, and what the derived
topology must fit (NPUs per node, prefill tp >= decode tp, the DP masters' addresses, the lookup RPC ports)."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    side_groups, side_local, side_local_key, split_groups)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import is_int, reads

# The integers the derivation reads (their bounds come from the specs: "At least 1.", "At most 65535.").
LAYOUT_INTS = ("a3_npus_per_node", "vllm_dp_size_local", "vllm_api_port", "vllm_dp_rpc_port",
               "vllm_prefill_tp_size", "vllm_decode_tp_size", "vllm_prefill_kv_port", "vllm_decode_kv_port",
               "etcd_client_port", "etcd_peer_port", "yuanrong_worker_port", "proxy_port", "proxy_admin_port")


def _bounds(ctx, key):
    option = ctx.specs.get(key)
    return (option.minimum if option else None), (option.maximum if option else None)


def _positive(ctx, key):
    least = _bounds(ctx, key)[0]
    return "set a positive integer" if least in (None, 1) else "set an integer >= %d" % least


@reads(*LAYOUT_INTS, types=LAYOUT_INTS)
def check_ints(ctx, h):
    """The integers of one host; a port above its maximum is named as a TCP port."""
    v = ctx.hosts.get(h, {})
    for key in LAYOUT_INTS:
        least, most = _bounds(ctx, key)
        if not is_int(v.get(key)) or int(v.get(key)) < (least if least is not None else 1):
            ctx.errors.append("%s: %s is %r: %s" % (h, key, v.get(key), _positive(ctx, key)))
            ctx.bad_numbers = True
        elif most is not None and int(v.get(key)) > most:
            ctx.errors.append("%s: %s %s is above %d: set a valid TCP port" % (h, key, v.get(key), most))


@reads("vllm_<side>_dp_size_local", "vllm_<side>_dp_groups", "vllm_<side>_lookup_rpc_port",
       types=("vllm_<side>_dp_size_local", "vllm_<side>_dp_groups", "vllm_<side>_lookup_rpc_port"))
def check_side_ints(ctx, h):
    v = ctx.hosts.get(h, {})
    for side in SIDES:
        own = v.get("vllm_%s_dp_size_local" % side)
        if own is not None and (not is_int(own) or int(own) < 1):
            ctx.errors.append("%s: vllm_%s_dp_size_local is %r: set a positive integer (engine instances per %s node) "
                              "or leave it unset for vllm_dp_size_local" % (h, side, own, side))
            ctx.bad_numbers = True
        count = v.get("vllm_%s_dp_groups" % side)
        if count is not None and (not is_int(count) or int(count) < 1):
            ctx.errors.append("%s: vllm_%s_dp_groups is %r: set a positive integer (independent DP groups the %s hosts "
                              "are split into; 1 = the seed's one group per side)" % (h, side, count, side))
            ctx.bad_numbers = True
        spec = v.get("vllm_%s_lookup_rpc_port" % side)
        if not (is_int(spec) or spec == "dp_rank"):
            ctx.errors.append("%s: vllm_%s_lookup_rpc_port is %r: set an integer or 'dp_rank'" % (h, side, spec))
            ctx.bad_numbers = True


@reads()
def check_numbers(ctx):
    for h in ctx.ordered:
        check_ints(ctx, h)
        check_side_ints(ctx, h)


def _side_values(ctx, side, key):
    """(variable, {host: value}) of one per-side value on the side's hosts."""
    hosts = ctx.hosts
    if key == "dp_size_local":
        return "vllm_%s_dp_size_local" % side, {h: side_local(hosts[h], side) for h in ctx.groups[side]}
    if key == "dp_groups":
        return "vllm_%s_dp_groups" % side, {h: side_groups(hosts[h], side) for h in ctx.groups[side]}
    return key, {h: hosts[h].get(key) for h in ctx.groups[side]}


@reads("vllm_dp_size_local", "vllm_<side>_dp_size_local", "vllm_<side>_tp_size", "vllm_<side>_kv_port",
       "vllm_<side>_dp_groups")
def check_side_values(ctx):
    """Values of a side, not of a host: every host of the side sets the same."""
    for side in SIDES:
        for key in ("dp_size_local", "vllm_%s_tp_size" % side, "vllm_%s_kv_port" % side, "dp_groups"):
            key, values = _side_values(ctx, side, key)
            if len({int(x) for x in values.values()}) > 1:
                ctx.errors.append("%s: %s differs between the %s hosts (%s): set one value for the group "
                                  "(group_vars)" % (", ".join(ctx.groups[side]), key, side,
                                                    ", ".join("%s=%s" % kv for kv in values.items())))
                ctx.inconsistent = True


@reads("vllm_<side>_dp_groups")
def check_groups_divide(ctx):
    """Independent DP groups: consecutive hosts of equal number, so every group has the same dp size (the
    Mooncake prefill/decode blocks describe one group of each side)."""
    for side in SIDES:
        members = ctx.groups[side]
        count, n = side_groups(ctx.hosts[members[0]], side), len(members)
        if not ctx.inconsistent and (count > n or n % count):
            fits = [str(d) for d in range(1, n + 1) if n % d == 0]
            ctx.errors.append("%s: vllm_%s_dp_groups is %d but the %s group has %d hosts (%s): the hosts must divide "
                              "evenly into groups of the same size (consecutive hosts in inventory order form a "
                              "group); set vllm_%s_dp_groups to one of %s, or add/remove %s hosts"
                              % (members[0], side, count, side, n, ", ".join(members), side, ", ".join(fits), side))
            ctx.inconsistent = True


@reads("vllm_dp_rpc_port", "vllm_<side>_dp_groups")
def check_group_rpc_port(ctx):
    """Each member's launcher reaches its DP master on its own vllm_dp_rpc_port, the master binds its own: one
    value per DP group, or the group never forms."""
    if ctx.inconsistent:
        return
    for side in SIDES:
        members = ctx.groups[side]
        for number, part in enumerate(split_groups(members, side_groups(ctx.hosts[members[0]], side))):
            values = {h: ctx.hosts[h].get("vllm_dp_rpc_port") for h in part}
            if len({int(x) for x in values.values()}) > 1:
                ctx.errors.append("%s: vllm_dp_rpc_port differs between the hosts of %s DP group %d (%s): every member "
                                  "reaches its DP master %s on its own value, so the group never forms; set one value "
                                  "for the group (group_vars)" % (", ".join(part), side, number,
                                                                  ", ".join("%s=%s" % kv for kv in values.items()),
                                                                  part[0]))


@reads("vllm_dp_address")
def check_dp_addresses(ctx):
    for side in SIDES:
        for group in ctx.topo["sides"][side]["groups"]:
            expected = group["dp_address"]
            for h in group["hosts"]:
                if ctx.topo["hosts"][h]["dp_address"] != expected:
                    ctx.warnings.append("%s: vllm_dp_address %s is not the %s group's first host (%s): the DP group "
                                        "only forms when every member points at rank 0's address (seed FAQ: DP "
                                        "组无法建立连接)" % (h, ctx.topo["hosts"][h]["dp_address"], side, expected))


@reads("vllm_<side>_tp_size")
def check_tp_order(ctx):
    ptp, dtp = ctx.topo["sides"]["prefill"]["tp_size"], ctx.topo["sides"]["decode"]["tp_size"]
    if ptp < dtp:
        ctx.errors.append("prefill/decode: vllm_prefill_tp_size %d is lower than vllm_decode_tp_size %d: the Mooncake "
                          "connector requires prefill tp >= decode tp; raise vllm_prefill_tp_size or lower "
                          "vllm_decode_tp_size" % (ptp, dtp))


@reads("a3_npus_per_node", "vllm_<side>_tp_size", "vllm_dp_size_local", "vllm_<side>_dp_size_local")
def check_npus_fit(ctx):
    """launch_online_dp.py gives local instance i the chips i x tp .. (i + 1) x tp - 1 (ASCEND_RT_VISIBLE_DEVICES),
    contiguous blocks from chip 0: tp x the instances per node must not exceed the node's NPUs (any tp fits
    otherwise; the launcher needs no divisor)."""
    for h in ctx.ordered:
        me, v = ctx.topo["hosts"][h], ctx.hosts[h]
        npus = int(v["a3_npus_per_node"])
        need = me["tp_size"] * me["dp_size_local"]
        if need > npus:
            ctx.errors.append("%s: vllm_%s_tp_size %d x %s %d = %d NPUs, but the node has %d "
                              "(a3_npus_per_node): lower tp or dp_size_local"
                              % (h, me["side"], me["tp_size"], side_local_key(v, me["side"]), me["dp_size_local"],
                                 need, npus))


@reads("vllm_<side>_lookup_rpc_port")
def check_lookup_ports(ctx):
    for h in ctx.ordered:
        me = ctx.topo["hosts"][h]
        lookups = [i["lookup_rpc_port"] for i in me["instances"]]
        if len(set(lookups)) != len(lookups):
            ctx.errors.append("%s: vllm_%s_lookup_rpc_port gives the same value %s to several instances on this "
                              "host (it names the IPC socket /tmp/lookup_rpc_port_<port>_dp_rank<rank>): set it to "
                              "'dp_rank' or one instance per node" % (h, me["side"], lookups))
