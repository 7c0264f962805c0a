# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Topology derivation for the A3 PD deployment.

Pure functions, no Ansible imports: the filter plugin, the validation and plain pytest tests all call these.
Input is the plain dict _inventory.from_hostvars builds from the inventory:

    {"groups": {"prefill": [...], "decode": [...]},
     "hosts": {name: {<per-host settings, see TOPOLOGY_KEYS>}}}

Everything derivable is derived here once: the DP groups of each side (vllm_<side>_dp_groups, default 1:
the seed's one group per side), their dp sizes, dp rank starts and dp addresses, the etcd and proxy hosts,
proxy backend lists, DS_WORKER_ADDR, kv port ranges, the Mooncake dp/tp blocks.

Imports run one way, validation -> topology -> inventory: the validation (plugin_utils/_validation) imports this
module, this module imports _inventory and never the validation.
"""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES

# Per-host inventory variables the derivation reads (the variable name is the key); the topology filter reads
# only these. Every one is an option of roles/common's spec (tests/unit/plugins/plugin_utils checks it).
TOPOLOGY_KEYS = (
    "a3_business_ip", "a3_nic_name", "a3_npus_per_node", "a3_etcd_host", "a3_etcd_hosts", "a3_proxy_host",
    "a3_proxy_hosts", "a3_ha", "proxy_admin_bind_host",
    "vllm_dp_size_local", "vllm_prefill_dp_size_local", "vllm_decode_dp_size_local", "vllm_api_port", "vllm_dp_rpc_port",
    "vllm_prefill_tp_size", "vllm_decode_tp_size",
    "vllm_prefill_kv_port", "vllm_decode_kv_port",
    "vllm_prefill_lookup_rpc_port", "vllm_decode_lookup_rpc_port",
    "etcd_client_port", "etcd_peer_port", "yuanrong_worker_port", "proxy_port", "proxy_admin_port",
    "hugepages_target", "hugepages_page_size", "vllm_dp_address",
    "vllm_prefill_dp_groups", "vllm_decode_dp_groups",
)

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kKmMgGtT]?)i?[bB]?\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}
# Mooncake's AscendDirectTransport binds random ports in [20000, 20000 + NPUs * 1000).
MOONCAKE_RANDOM_BASE = 20000
MOONCAKE_RANDOM_PER_NPU = 1000


class TopologyError(ValueError):
    """The inventory cannot be turned into a topology (validation reports why)."""


def parse_size(value) -> int:
    """Return a size in bytes from '500G', '1T', '2048 kB', '2M' or an int (bytes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ValueError("cannot read size %r: use a number with a unit, e.g. 500G, 1T, 128M" % (value,))
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def size_gib(value) -> int:
    """Whole GiB of a size (500G -> 500, 1T -> 1024)."""
    return parse_size(value) // 1024 ** 3


def size_mib(value) -> int:
    """Whole MiB of a size (500G -> 512000)."""
    return parse_size(value) // 1024 ** 2


def docker_size(value) -> str:
    """Size for docker's --shm-size: whole GiB as 'Ng' (500G -> 500g, 1T -> 1024g), else 'Nm'."""
    size = parse_size(value)
    if size % 1024 ** 3 == 0:
        return "%dg" % (size // 1024 ** 3)
    return "%dm" % (size // 1024 ** 2)


def side_of(groups, host):
    sides = [s for s in SIDES if host in (groups.get(s) or [])]
    return sides[0] if len(sides) == 1 else None


def _lookup_port(spec, rank, local_rank=0):
    """lookup_rpc_port is an int, or the string 'dp_rank' meaning the instance's global dp rank. An int is
    the first instance's value on each host; the next local instances count up from it (distinct per host;
    the seed's layout, one instance per node, keeps the value as written)."""
    if isinstance(spec, str) and spec.strip() == "dp_rank":
        return rank
    return int(spec) + local_rank


def side_local(values: dict, side: str) -> int:
    """Engine instances per node of a side: vllm_<side>_dp_size_local, else vllm_dp_size_local (seed 1)."""
    own = values.get("vllm_%s_dp_size_local" % side)
    return int(own if own is not None else values.get("vllm_dp_size_local"))


def side_local_key(values: dict, side: str) -> str:
    """The variable side_local() took its value from (for messages)."""
    return ("vllm_%s_dp_size_local" % side if values.get("vllm_%s_dp_size_local" % side) is not None
            else "vllm_dp_size_local")


def side_groups(values: dict, side: str) -> int:
    """Independent DP groups of a side: vllm_<side>_dp_groups (unset: 1, the seed's one group per side)."""
    own = values.get("vllm_%s_dp_groups" % side)
    return int(own) if own is not None else 1


def split_groups(members: list, count: int) -> list:
    """The side's hosts in inventory order, cut into `count` consecutive groups of equal size."""
    size = len(members) // count
    return [members[i * size:(i + 1) * size] for i in range(count)]


def _dp_groups(hosts: dict, members: list, side: str) -> list:
    """The DP groups of one side: consecutive hosts, each group with its master, address, size and backends."""
    def hv(host, key):
        return hosts[host].get(key)

    lead = members[0]
    local = side_local(hosts[lead], side)
    parts = split_groups(members, side_groups(hosts[lead], side))
    group_dp = len(parts[0]) * local
    dp_groups = []
    for number, part in enumerate(parts):
        dp_groups.append({
            "index": number,
            "hosts": part,
            "dp_master": part[0],
            "dp_address": hv(part[0], "a3_business_ip"),
            "dp_rpc_port": int(hv(part[0], "vllm_dp_rpc_port")),
            "dp_size": group_dp,
            # Proxy backends of this group: one entry per engine instance (host repeated per local rank).
            "backend_hosts": [hv(h, "a3_business_ip") for h in part for _unused in range(side_local(hosts[h], side))],
            "api_ports": [int(hv(h, "vllm_api_port")) + i for h in part for i in range(side_local(hosts[h], side))],
        })
    return dp_groups


def _side(hosts: dict, members: list, side: str) -> dict:
    """One side of the topology: its hosts, DP groups, dp/tp sizes and proxy backends."""
    lead = members[0]
    local = side_local(hosts[lead], side)
    dp_groups = _dp_groups(hosts, members, side)
    return {
        "hosts": members,
        "ips": [hosts[h].get("a3_business_ip") for h in members],
        "api_ports": [p for g in dp_groups for p in g["api_ports"]],
        # The dp size of one DP group (every group of a side has the same size); the seed: the whole side.
        "dp_size": dp_groups[0]["dp_size"],
        "dp_size_local": local,
        "tp_size": int(hosts[lead].get("vllm_%s_tp_size" % side)),
        "dp_address": dp_groups[0]["dp_address"],
        "kv_role": "kv_producer" if side == "prefill" else "kv_consumer",
        "groups": dp_groups,
        "instances": len(members) * local,
        # Proxy backend lists: every instance of every group (the proxy balances over all groups).
        "backend_hosts": [ip for g in dp_groups for ip in g["backend_hosts"]],
    }


def _instances(v: dict, side: str, group_kv_port: int, start: int) -> list:
    """The engine instances of one host: local rank, dp rank, API port, devices, kv ports, lookup RPC port."""
    local = side_local(v, side)
    tp = int(v["vllm_%s_tp_size" % side])
    instances = []
    for i in range(local):
        rank = start + i
        kv_first = group_kv_port + rank * tp
        instances.append({
            "local_rank": i,
            "dp_rank": rank,
            "api_port": int(v["vllm_api_port"]) + i,
            "devices": list(range(i * tp, (i + 1) * tp)),
            "kv_ports": [kv_first, kv_first + tp - 1],
            "lookup_rpc_port": _lookup_port(v["vllm_%s_lookup_rpc_port" % side], rank, i),
        })
    return instances


def _host(v: dict, side: str, group: dict, index: int, index_in_group: int) -> dict:
    """One host's entry of the topology (a3_self): its side, group, ranks, addresses and ports."""
    local = side_local(v, side)
    tp = int(v["vllm_%s_tp_size" % side])
    side_kv_port = int(v["vllm_%s_kv_port" % side])
    # vLLM numbers ranks within the DP group (--data-parallel-rank < --data-parallel-size) and the
    # Mooncake connector listens on kv_port + that rank x tp. Its handshake cache is keyed by the remote
    # engine_id and port only (kv_caches_base_addr[engine_id][port]), and vLLM makes engine_id
    # "<id>_dp<local rank>": rank 0 of two prefill groups would share both. So each group's kv_port
    # starts after the previous groups' ranges: every instance of a side keeps a port range of its own
    # (the seed's: vllm_<side>_kv_port + instance x tp), and the seed (one group) keeps its value.
    group_kv_port = side_kv_port + group["index"] * group["dp_size"] * tp
    start = index_in_group * local
    ip = v["a3_business_ip"]
    return {
        "side": side,
        "index": index,
        "group": group["index"],
        "group_hosts": list(group["hosts"]),
        "business_ip": ip,
        "nic_name": v["a3_nic_name"],
        "dp_size": group["dp_size"],
        "dp_size_local": local,
        "dp_rank_start": start,
        "dp_address": v.get("vllm_dp_address") or group["dp_address"],
        "dp_rpc_port": int(v["vllm_dp_rpc_port"]),
        "tp_size": tp,
        "kv_port": group_kv_port,
        "vllm_start_port": int(v["vllm_api_port"]),
        "instances": _instances(v, side, group_kv_port, start),
        "ds_worker_addr": "%s:%s" % (ip, int(v["yuanrong_worker_port"])),
    }


def derive(inv: dict) -> dict:
    """Derive the whole topology. Raises TopologyError if the inventory is unusable;
    call the validation (_validation.validate) first to get every problem at once."""
    groups, hosts = inv["groups"], inv["hosts"]
    for side in SIDES:
        if not groups.get(side):
            raise TopologyError("group %r is missing or empty" % side)
    first_prefill = groups["prefill"][0]
    anchor = hosts[first_prefill]
    ordered = list(groups["prefill"]) + list(groups["decode"])
    etcd_hosts = etcd_members_of(anchor, first_prefill, ordered)
    proxy_hosts = proxy_hosts_of(anchor, first_prefill, ordered)
    sides = {side: _side(hosts, list(groups[side]), side) for side in SIDES}
    # The Mooncake prefill/decode blocks: the dp/tp of one DP group of each side, the same in every instance's
    # kv-transfer config. vllm-ascend 0.18.0's MooncakeConnector (kv_p2p/mooncake_connector.py) only asserts and
    # stores the remote side's dp_size (_prefill_dp_size/_decode_dp_size are read nowhere else): which remote rank
    # to pull from comes with each request (kv_transfer_params remote_host/remote_port, remote_ptp_size), so the
    # peer block need not list every instance of the other side. Its own block must equal what vLLM runs
    # (check_mooncake: --data-parallel-size, i.e. its group's dp size). Groups of a side are equally sized
    # (validation), so "one group of the peer side" is well defined and the seed (one group per side) is unchanged.
    mooncake = {side: {"dp_size": sides[side]["dp_size"], "tp_size": sides[side]["tp_size"]}
                for side in SIDES}
    per_host = {}
    for side in SIDES:
        for group in sides[side]["groups"]:
            for index_in_group, host in enumerate(group["hosts"]):
                entry = _host(hosts[host], side, group, groups[side].index(host), index_in_group)
                entry.update(is_etcd_host=host in etcd_hosts, is_proxy_host=host in proxy_hosts)
                per_host[host] = entry
    return _result(inv, sides, mooncake, per_host, etcd_hosts, proxy_hosts)


# a3_ha (no single point of failure) without a3_etcd_hosts / a3_proxy_hosts: this many of the inventory's hosts
# (prefill hosts first, in inventory order) run etcd / a proxy.
HA_ETCD_MEMBERS, HA_PROXIES = 3, 2


def _true(value) -> bool:
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


def _ha_hosts(anchor: dict, ordered, single_key: str, count: int) -> list:
    """The first count hosts of ordered under a3_ha (and no single host named), else []."""
    if _true(anchor.get("a3_ha")) and not anchor.get(single_key) and len(ordered) >= count:
        return [str(h) for h in list(ordered)[:count]]
    return []


def etcd_members_of(anchor: dict, first_prefill: str, ordered=()) -> list:
    """The etcd members' hosts, from the first prefill host's values: a3_etcd_hosts (a cluster, in that order),
    else under a3_ha the first three hosts of ordered (the inventory's prefill hosts, then its decode hosts), else
    a3_etcd_host, else the first prefill host (the seed's single member)."""
    listed = anchor.get("a3_etcd_hosts") or []
    if isinstance(listed, (list, tuple)) and listed:   # another type: the option's spec reports it
        return [str(h) for h in listed]
    return _ha_hosts(anchor, ordered, "a3_etcd_host", HA_ETCD_MEMBERS) or [anchor.get("a3_etcd_host") or first_prefill]


def proxy_hosts_of(anchor: dict, first_prefill: str, ordered=()) -> list:
    """The proxy hosts, from the first prefill host's values: a3_proxy_hosts (one proxy on each, in that order),
    else under a3_ha the first two hosts of ordered, else a3_proxy_host, else the first prefill host (the seed's
    single proxy)."""
    listed = anchor.get("a3_proxy_hosts") or []
    if isinstance(listed, (list, tuple)) and listed:   # another type: the option's spec reports it
        return list(dict.fromkeys(str(h) for h in listed))
    return _ha_hosts(anchor, ordered, "a3_proxy_host", HA_PROXIES) or [anchor.get("a3_proxy_host") or first_prefill]


# Addresses that mean "every address of the host" as a listen address.
WILDCARD = ("", "0.0.0.0", "::")


def _proxy(hosts: dict, host: str) -> dict:
    """One proxy as its own host's values place it: its public URL and its admin listener's URL as that host
    reaches it (the admin bind address, or the host's business IP when it binds every address)."""
    values = hosts[host]
    ip = values["a3_business_ip"]
    admin = str(values.get("proxy_admin_bind_host") or "")
    return {"host": host, "ip": ip, "url": "http://%s:%s" % (ip, int(values["proxy_port"])),
            "admin_url": "http://%s:%s" % (ip if admin in WILDCARD else admin, int(values["proxy_admin_port"]))}


def _etcd_member(hosts: dict, host: str) -> dict:
    values = hosts[host]
    return {"host": host, "ip": values["a3_business_ip"], "client_port": int(values["etcd_client_port"]),
            "peer_port": int(values["etcd_peer_port"])}


def _result(inv: dict, sides: dict, mooncake: dict, per_host: dict, etcd_hosts: list, proxy_hosts: list) -> dict:
    groups, hosts = inv["groups"], inv["hosts"]
    per_host = {h: per_host[h] for s in SIDES for h in groups[s]}
    members = [_etcd_member(hosts, h) for h in etcd_hosts if h in hosts]
    proxies = [_proxy(hosts, h) for h in proxy_hosts if h in hosts]
    proxy_host = proxy_hosts[0]
    endpoints = ["%s:%s" % (m["ip"], m["client_port"]) for m in members]
    first = members[0] if members else None
    return {
        "sides": sides,
        "mooncake": mooncake,
        "hosts": per_host,
        # etcd_host/etcd_ip/etcd_address: the first member (one etcd: the seed's); etcd_endpoints: every member's
        # client address, what every client is given (a cluster answers on any of them)
        "etcd_host": etcd_hosts[0],
        "etcd_ip": first["ip"] if first else None,
        "etcd_address": endpoints[0] if endpoints else None,
        "etcd_hosts": list(etcd_hosts),
        "etcd_members": members,
        "etcd_endpoints": endpoints,
        # proxy_host/proxy_ip: the first proxy (one proxy: the seed's); proxies: every proxy's host, IP, public URL
        # and admin URL (a3_proxy_hosts: one proxy on each host, each serving the whole cluster)
        "proxy_host": proxy_host,
        "proxy_ip": hosts[proxy_host]["a3_business_ip"] if proxy_host in hosts else None,
        "proxy_hosts": list(proxy_hosts),
        "proxies": proxies,
    }


# proxy_engine vllm-router binds this many ports from proxy_router_base_port on the proxy host's loopback: the
# router, the wrapper's listener behind the edge, the router's discovery, the router's metrics, haproxy's stats
# (roles/proxy/vars: proxy_router_ports).
ROUTER_PORTS = 5


def host_ports(host: str, topo: dict, hv: dict) -> list:
    """Every (first, last, what) port range the deployment binds on one host."""
    me = topo["hosts"][host]
    ranges = []
    for inst in me["instances"]:
        ranges.append((inst["api_port"], inst["api_port"], "vllm API port of dp rank %d (vllm_api_port)"
                       % inst["dp_rank"]))
        ranges.append((inst["kv_ports"][0], inst["kv_ports"][1],
                       "Mooncake kv ports of dp rank %d (vllm_%s_kv_port + rank x tp)" % (inst["dp_rank"], me["side"])))
    if me["dp_rank_start"] == 0:
        ranges.append((me["dp_rpc_port"], me["dp_rpc_port"], "DP RPC port (vllm_dp_rpc_port)"))
    ranges.append((int(hv["yuanrong_worker_port"]),) * 2 + ("yuanrong worker port (yuanrong_worker_port)",))
    if me["is_etcd_host"]:
        ranges.append((int(hv["etcd_client_port"]),) * 2 + ("etcd client port (etcd_client_port)",))
        ranges.append((int(hv["etcd_peer_port"]),) * 2 + ("etcd peer port (etcd_peer_port)",))
    if me["is_proxy_host"]:
        ranges.append((int(hv["proxy_port"]),) * 2 + ("proxy port (proxy_port)",))
        ranges.append((int(hv["proxy_admin_port"]),) * 2 + ("proxy admin port (proxy_admin_port)",))
        if hv.get("proxy_engine") == "vllm-router" and "proxy_router_base_port" in hv:
            base = int(hv["proxy_router_base_port"])
            ranges.append((base, base + ROUTER_PORTS - 1, "vllm-router's loopback ports (proxy_router_base_port and the "
                           "%d after it)" % (ROUTER_PORTS - 1)))
    return ranges


def backends(topo: dict) -> list:
    """Every engine instance of the deployment: prefill first, in group order."""
    out = []
    for side in SIDES:
        for host in topo["sides"][side]["hosts"]:
            me = topo["hosts"][host]
            for inst in me["instances"]:
                out.append({"side": side, "host": host, "ip": me["business_ip"], "port": inst["api_port"],
                            "dp_rank": inst["dp_rank"]})
    return out
