# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Topology derivation and inventory validation for the A3 PD deployment.

Pure functions, no Ansible imports: the filter plugin, the validate action and plain pytest
tests all call these. Input is a plain dict built from the inventory:

    {"groups": {"prefill": [...], "decode": [...]},
     "hosts": {name: {<per-host settings, see HOST_KEYS>}}}

Everything derivable is derived here once: the DP groups of each side (vllm_<side>_dp_groups, default 1:
the seed's one group per side), their dp sizes, dp rank starts and dp addresses, the etcd and proxy hosts,
proxy backend lists, DS_WORKER_ADDR, kv port ranges, the Mooncake dp/tp blocks.
"""
from __future__ import annotations

import ipaddress
import re

SIDES = ("prefill", "decode")

# Per-host inventory variables the derivation reads (the variable name is the key).
TOPOLOGY_KEYS = (
    "a3_business_ip", "a3_nic_name", "a3_npus_per_node", "a3_etcd_host", "a3_proxy_host",
    "vllm_dp_size_local", "vllm_prefill_dp_size_local", "vllm_decode_dp_size_local", "vllm_api_port", "vllm_dp_rpc_port",
    "vllm_prefill_tp_size", "vllm_decode_tp_size",
    "vllm_prefill_kv_port", "vllm_decode_kv_port",
    "vllm_prefill_lookup_rpc_port", "vllm_decode_lookup_rpc_port",
    "etcd_client_port", "etcd_peer_port", "yuanrong_worker_port", "proxy_port", "proxy_admin_port",
    "hugepages_target", "hugepages_page_size", "vllm_dp_address",
    "vllm_prefill_dp_groups", "vllm_decode_dp_groups",
)
# Further per-host variables only validation reads (_validate_rules; its RULE_KEYS must all be in HOST_KEYS).
# None of them may refer to a3 or a3_self: the topology filter reads HOST_KEYS to derive those.
VALIDATION_KEYS = (
    "container_pull_retries", "container_pull_delay", "container_pull_timeout", "etcd_health_timeout", "proxy_health_timeout",
    "proxy_fail_threshold", "proxy_retry_after", "vllm_health_timeout", "vllm_health_interval", "vllm_stop_timeout",
    "vllm_canary_interval", "vllm_canary_timeout", "vllm_canary_failures", "vllm_peer_down_checks",
    "yuanrong_node_timeout_s", "yuanrong_node_dead_timeout_s", "yuanrong_arena_per_tenant",
    "yuanrong_register_timeout", "yuanrong_start_timeout", "supervise_restart_sec", "supervise_backoff_base",
    "supervise_backoff_max", "supervise_crash_loop_restarts", "supervise_crash_loop_minutes",
    "supervise_wait_timeout", "gate_request_timeout", "gate_pool_prefix_words", "preflight_npu_smi_timeout",
    "preflight_hccn_timeout", "preflight_hccn_max_workers", "preflight_hbm_used_limit_mb", "preflight_ping_count",
    "proxy_probe_interval", "proxy_probe_timeout", "proxy_first_byte_timeout", "container_privileged",
    "hugepages_per_numa", "patches_verify_backend", "patches_pip_compile", "proxy_wrapper", "yuanrong_enable_huge_tlb", "gate_pool_check",
    "preflight_hccs_ping", "preflight_strict_link", "preflight_strict_net_health", "preflight_memory_check",
    "preflight_buffer_pool_advice", "preflight_docker_check", "preflight_model_check", "preflight_nic_check",
    "preflight_port_check", "a3_work_dir", "a3_host_work_dir", "container_timezone_file", "container_working_dir",
    "etcd_install_dir", "etcd_data_dir", "etcd_unit_file", "hugepages_sysctl_file", "patches_container_dir",
    "patches_backend_map_file", "vllm_model_path", "vllm_launcher_src", "proxy_script_src", "yuanrong_liveness_path",
    "yuanrong_run_dir", "supervise_helper_dir", "supervise_state_dir", "vllm_served_model_name",
    "yuanrong_package_version", "patches_git_user_email", "patches_git_user_name", "vllm_python", "yuanrong_python",
    "proxy_python", "container_restart_policy", "proxy_restart_policy", "yuanrong_install_from",
    "vllm_kv_pool_backend", "vllm_kv_pool_enabled", "preflight_hbm_in_use", "preflight_peer_mode",
    "preflight_tls_scope", "container_devices",
    "container_volumes", "container_extra_volumes", "container_proxy_env", "container_capabilities",
    "container_cap_drop", "container_security_opts", "container_device_cgroup_rules", "proxy_unset_env",
    "vllm_env_unset", "yuanrong_numa_options", "yuanrong_pip_args", "patches_pip_index_args", "preflight_hccn_checks",
    "preflight_port_owner_names", "preflight_port_owner_cmdlines", "container_extra_env", "proxy_extra_args",
    "yuanrong_worker_flags", "vllm_mooncake_extra_config", "vllm_kv_top_level_extra", "vllm_env_common",
    "vllm_prefill_env", "vllm_decode_env", "vllm_env_extra", "vllm_serve_args_common", "vllm_prefill_serve_args", "vllm_decode_serve_args",
    "patches_pip_pins", "patches_table", "etcd_checksums", "a3_listen_address", "vllm_bind_host", "proxy_bind_host",
    "etcd_listen_address", "container_registry", "container_image_name", "container_image_tag", "container_name",
    "proxy_container_name", "patches_vllm_ascend_version", "patches_pip_extra_args", "etcd_version", "etcd_name",
    "etcd_archive_src", "etcd_download_base_url", "etcd_service_name", "yuanrong_wheel_url", "yuanrong_wheel_src",
    "vllm_prefill_engine_id", "vllm_decode_engine_id", "supervise_worker_service", "supervise_engine_service",
    "vllm_log_file", "preflight_page_size", "preflight_min_hdk", "preflight_min_cann", "preflight_fabric_min_hdk",
    "preflight_fabric_min_cann", "preflight_memory_reserve", "gate_expect_pattern",
    "proxy_admin_bind_host", "proxy_admin_token", "proxy_api_keys", "vllm_api_key", "etcd_tls",
    "etcd_tls_ca_days", "etcd_tls_cert_days", "etcd_tls_renew_days", "proxy_max_body_bytes", "proxy_max_inflight",
    "proxy_header_timeout", "proxy_body_timeout", "proxy_idle_timeout", "yuanrong_curve_zmq",
    "monitoring_prometheus_web_tls", "monitoring_prometheus_web_users", "monitoring_prometheus_web_user",
    "monitoring_prometheus_web_password",
)
HOST_KEYS = TOPOLOGY_KEYS + VALIDATION_KEYS

PLACEHOLDER_RE = re.compile(r"<[^>]*>|\bxxxx\b|CHANGE_?ME", re.IGNORECASE)
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


def derive(inv: dict) -> dict:
    """Derive the whole topology. Raises TopologyError if the inventory is unusable;
    call validate() first to get every problem at once."""
    groups, hosts = inv["groups"], inv["hosts"]
    for side in SIDES:
        if not groups.get(side):
            raise TopologyError("group %r is missing or empty" % side)

    def hv(host, key):
        return hosts[host].get(key)

    first_prefill = groups["prefill"][0]
    anchor = hosts[first_prefill]
    etcd_host = anchor.get("a3_etcd_host") or first_prefill
    proxy_host = anchor.get("a3_proxy_host") or first_prefill
    sides = {}
    for side in SIDES:
        members = list(groups[side])
        lead = members[0]
        local = side_local(hosts[lead], side)
        tp = int(hv(lead, "vllm_%s_tp_size" % side))
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
        sides[side] = {
            "hosts": members,
            "ips": [hv(h, "a3_business_ip") for h in members],
            "api_ports": [p for g in dp_groups for p in g["api_ports"]],
            # The dp size of one DP group (every group of a side has the same size); the seed: the whole side.
            "dp_size": group_dp,
            "dp_size_local": local,
            "tp_size": tp,
            "dp_address": dp_groups[0]["dp_address"],
            "kv_role": "kv_producer" if side == "prefill" else "kv_consumer",
            "groups": dp_groups,
            "instances": len(members) * local,
        }
    # Proxy backend lists: every instance of every group (the proxy balances over all groups).
    for side in SIDES:
        s = sides[side]
        s["backend_hosts"] = [ip for g in s["groups"] for ip in g["backend_hosts"]]
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
                index = groups[side].index(host)
                v = hosts[host]
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
                per_host[host] = {
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
                    "instances": instances,
                    "ds_worker_addr": "%s:%s" % (ip, int(v["yuanrong_worker_port"])),
                    "is_etcd_host": host == etcd_host,
                    "is_proxy_host": host == proxy_host,
                }
    per_host = {h: per_host[h] for s in SIDES for h in groups[s]}
    etcd_port = int(hosts[etcd_host]["etcd_client_port"]) if etcd_host in hosts else None
    return {
        "sides": sides,
        "mooncake": mooncake,
        "hosts": per_host,
        "etcd_host": etcd_host,
        "etcd_ip": hosts[etcd_host]["a3_business_ip"] if etcd_host in hosts else None,
        "etcd_address": ("%s:%s" % (hosts[etcd_host]["a3_business_ip"], etcd_port)
                         if etcd_host in hosts else None),
        "proxy_host": proxy_host,
        "proxy_ip": hosts[proxy_host]["a3_business_ip"] if proxy_host in hosts else None,
    }


def _is_int(value):
    try:
        int(value)
        return not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


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
    return ranges


def _merge_hosts(messages, hosts):
    """Fold 'h1: text' and 'h2: text' into 'h1, h2: text' (a group_vars value wrong on every host reads
    once), keeping first-seen order."""
    merged, order = {}, []
    for msg in messages:
        head, sep, rest = msg.partition(": ")
        key = rest if sep and head in hosts else msg
        if key not in merged:
            merged[key] = []
            order.append(key)
        if sep and head in hosts:
            merged[key].append(head)
    return [("%s: %s" % (", ".join(merged[k]), k)) if merged[k] else k for k in order]


def validate(inv: dict, allow_placeholders: bool = False):
    """Return (errors, warnings), each naming the host(s), the variable and what to set."""
    errors, warnings = _validate(inv, allow_placeholders)
    hosts = set((inv.get("hosts") or {}).keys())
    return _merge_hosts(errors, hosts), _merge_hosts(warnings, hosts)


def _validate(inv: dict, allow_placeholders: bool = False):
    """Return (errors, warnings): every problem of the inventory at once, each naming the host,
    the variable and what to set. With allow_placeholders (render mode) a placeholder is a warning."""
    errors, warnings = [], []
    placeholder_sink = warnings if allow_placeholders else errors
    groups, hosts = inv.get("groups") or {}, inv.get("hosts") or {}

    for side in SIDES:
        if not groups.get(side):
            errors.append("inventory: group '%s' is missing or empty: add the %s hosts under "
                          "'%s:' in the inventory (the seed has two)" % (side, side, side))
    members = {}
    for side in SIDES:
        for h in groups.get(side) or []:
            members.setdefault(h, []).append(side)
    ordered = list(members)  # inventory order: prefill hosts, then decode hosts
    for h, sides in members.items():
        if len(sides) > 1:
            errors.append("%s: host is in both 'prefill' and 'decode': a node serves one side only, "
                          "remove it from one group" % h)

    seen_ips = {}
    for h in ordered:
        v = hosts.get(h, {})
        ip = v.get("a3_business_ip")
        if ip is None or str(ip).strip() == "":
            errors.append("%s: a3_business_ip is not set: set it to the node's business IP" % h)
        elif PLACEHOLDER_RE.search(str(ip)):
            placeholder_sink.append("%s: a3_business_ip is still the placeholder %r: set it to the node's business IP"
                                    % (h, ip))
        else:
            try:
                ipaddress.ip_address(str(ip))
            except ValueError:
                errors.append("%s: a3_business_ip %r is not a valid IP address: set the node's business IP, "
                              "e.g. 10.0.0.11" % (h, ip))
            else:
                seen_ips.setdefault(str(ip), []).append(h)
        nic = v.get("a3_nic_name")
        if nic is None or str(nic).strip() == "":
            errors.append("%s: a3_nic_name is not set: set it to the business NIC name (e.g. enp3s0, bond0)" % h)
        elif PLACEHOLDER_RE.search(str(nic)):
            placeholder_sink.append("%s: a3_nic_name is still the placeholder %r: set it to the business NIC name "
                                    "(e.g. enp3s0, bond0)" % (h, nic))
    for h in ordered:
        override = hosts.get(h, {}).get("vllm_dp_address")
        if override:
            try:
                ipaddress.ip_address(str(override))
            except ValueError:
                errors.append("%s: vllm_dp_address %r is not a valid IP address: remove it (the group's first host "
                              "is used) or set an address of that host" % (h, override))
    for ip, hs in sorted(seen_ips.items()):
        if len(hs) > 1:
            errors.append("%s: a3_business_ip %s is used by %d hosts: every node needs its own business IP"
                          % (", ".join(hs), ip, len(hs)))

    int_keys = ("a3_npus_per_node", "vllm_dp_size_local", "vllm_api_port", "vllm_dp_rpc_port",
                "vllm_prefill_tp_size", "vllm_decode_tp_size", "vllm_prefill_kv_port", "vllm_decode_kv_port",
                "etcd_client_port", "etcd_peer_port", "yuanrong_worker_port", "proxy_port", "proxy_admin_port")
    bad_numbers = False
    for h in ordered:
        v = hosts.get(h, {})
        for key in int_keys:
            if not _is_int(v.get(key)) or int(v.get(key)) < 1:
                errors.append("%s: %s is %r: set a positive integer" % (h, key, v.get(key)))
                bad_numbers = True
        for side in SIDES:
            own = v.get("vllm_%s_dp_size_local" % side)
            if own is not None and (not _is_int(own) or int(own) < 1):
                errors.append("%s: vllm_%s_dp_size_local is %r: set a positive integer (engine instances per %s node) "
                              "or leave it unset for vllm_dp_size_local" % (h, side, own, side))
                bad_numbers = True
            count = v.get("vllm_%s_dp_groups" % side)
            if count is not None and (not _is_int(count) or int(count) < 1):
                errors.append("%s: vllm_%s_dp_groups is %r: set a positive integer (independent DP groups the %s hosts "
                              "are split into; 1 = the seed's one group per side)" % (h, side, count, side))
                bad_numbers = True
            spec = v.get("vllm_%s_lookup_rpc_port" % side)
            if not (_is_int(spec) or spec == "dp_rank"):
                errors.append("%s: vllm_%s_lookup_rpc_port is %r: set an integer or 'dp_rank'" % (h, side, spec))
                bad_numbers = True
        for key in ("vllm_api_port", "vllm_dp_rpc_port", "vllm_prefill_kv_port", "vllm_decode_kv_port",
                    "etcd_client_port", "etcd_peer_port", "yuanrong_worker_port", "proxy_port", "proxy_admin_port"):
            if _is_int(v.get(key)) and int(v.get(key)) > 65535:
                errors.append("%s: %s %s is above 65535: set a valid TCP port" % (h, key, v.get(key)))

    for h in ordered:
        v = hosts.get(h, {})
        try:
            target, page = parse_size(v.get("hugepages_target")), parse_size(v.get("hugepages_page_size"))
        except ValueError as exc:
            errors.append("%s: hugepages_target/hugepages_page_size: %s" % (h, exc))
            continue
        if page <= 0 or target % page:
            errors.append("%s: hugepages_target %s is not a multiple of the page size %s: set a multiple "
                          "(e.g. 500G)" % (h, v.get("hugepages_target"), v.get("hugepages_page_size")))

    # Every other variable: type, range and what vLLM, the launcher, docker, etcd and the datasystem accept.
    from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _validate_rules as rules
    side_of_host = {h: (s[0] if len(s) == 1 else None) for h, s in members.items()}
    more_errors, more_warnings = rules.check_hosts(inv, ordered, side_of_host)
    errors += more_errors
    warnings += more_warnings

    for key, what in (("a3_etcd_host", "etcd"), ("a3_proxy_host", "proxy")):
        named = {hosts.get(h, {}).get(key) for h in members} - {None, ""}
        for n in sorted(named):
            if n not in members:
                errors.append("all: %s is %r, which is not a host of the prefill or decode group: set it to "
                              "one of %s or leave it empty (first prefill host)" % (key, n, ", ".join(ordered) or "the inventory hosts"))

    if groups.get("prefill") and groups["prefill"][0] in hosts:
        anchor = hosts[groups["prefill"][0]]
        service_hosts = [anchor.get(key) or groups["prefill"][0] for key in ("a3_etcd_host", "a3_proxy_host")]
        more_errors, more_warnings = rules.check_service_hosts(inv, *service_hosts)
        errors += more_errors
        warnings += more_warnings

    if bad_numbers or any(not groups.get(side) for side in SIDES):
        return errors, warnings

    # Consistency within a side: these values are per group, not per host.
    inconsistent = False
    for side in SIDES:
        for key in ("dp_size_local", "vllm_%s_tp_size" % side, "vllm_%s_kv_port" % side, "dp_groups"):
            if key == "dp_size_local":
                values = {h: side_local(hosts[h], side) for h in groups[side]}
                key = "vllm_%s_dp_size_local" % side
            elif key == "dp_groups":
                values = {h: side_groups(hosts[h], side) for h in groups[side]}
                key = "vllm_%s_dp_groups" % side
            else:
                values = {h: hosts[h].get(key) for h in groups[side]}
            if len({int(x) for x in values.values()}) > 1:
                errors.append("%s: %s differs between the %s hosts (%s): set one value for the group "
                              "(group_vars)" % (", ".join(groups[side]), key, side,
                                                ", ".join("%s=%s" % kv for kv in values.items())))
                inconsistent = True
    # Independent DP groups: consecutive hosts of equal number, so every group has the same dp size (the
    # Mooncake prefill/decode blocks describe one group of each side).
    for side in SIDES:
        count, n = side_groups(hosts[groups[side][0]], side), len(groups[side])
        if not inconsistent and (count > n or n % count):
            fits = [str(d) for d in range(1, n + 1) if n % d == 0]
            errors.append("%s: vllm_%s_dp_groups is %d but the %s group has %d hosts (%s): the hosts must divide "
                          "evenly into groups of the same size (consecutive hosts in inventory order form a group); "
                          "set vllm_%s_dp_groups to one of %s, or add/remove %s hosts"
                          % (groups[side][0], side, count, side, n, ", ".join(groups[side]), side, ", ".join(fits),
                             side))
            inconsistent = True
    if inconsistent or any(len(s) > 1 for s in members.values()):
        return errors, warnings

    topo = derive(inv)
    more_errors, more_warnings = rules.check_topology(inv, topo)
    errors += more_errors
    warnings += more_warnings
    for side in SIDES:
        for group in topo["sides"][side]["groups"]:
            expected = group["dp_address"]
            for h in group["hosts"]:
                if topo["hosts"][h]["dp_address"] != expected:
                    warnings.append("%s: vllm_dp_address %s is not the %s group's first host (%s): the DP group only "
                                    "forms when every member points at rank 0's address (seed FAQ: DP 组无法建立连接)"
                                    % (h, topo["hosts"][h]["dp_address"], side, expected))
    ptp, dtp = topo["sides"]["prefill"]["tp_size"], topo["sides"]["decode"]["tp_size"]
    if ptp < dtp:
        errors.append("prefill/decode: vllm_prefill_tp_size %d is lower than vllm_decode_tp_size %d: the Mooncake "
                      "connector requires prefill tp >= decode tp; raise vllm_prefill_tp_size or lower "
                      "vllm_decode_tp_size" % (ptp, dtp))
    for h in ordered:
        me, v = topo["hosts"][h], hosts[h]
        npus = int(v["a3_npus_per_node"])
        need = me["tp_size"] * me["dp_size_local"]
        if need > npus:
            errors.append("%s: vllm_%s_tp_size %d x %s %d = %d NPUs, but the node has %d "
                          "(a3_npus_per_node): lower tp or dp_size_local"
                          % (h, me["side"], me["tp_size"], side_local_key(v, me["side"]), me["dp_size_local"], need,
                             npus))
        lookups = [i["lookup_rpc_port"] for i in me["instances"]]
        if len(set(lookups)) != len(lookups):
            errors.append("%s: vllm_%s_lookup_rpc_port gives the same value %s to several instances on this "
                          "host (it names the IPC socket /tmp/lookup_rpc_port_<port>_dp_rank<rank>): set it to "
                          "'dp_rank' or one instance per node" % (h, me["side"], lookups))
        ranges = host_ports(h, topo, v)
        for i, (a1, b1, w1) in enumerate(ranges):
            for a2, b2, w2 in ranges[i + 1:]:
                if a1 <= b2 and a2 <= b1:
                    kind = "overlaps" if (a1 != b1 or a2 != b2) else "is the same port as"
                    errors.append("%s: %s [%d-%d] %s %s [%d-%d]: move one of them" % (h, w1, a1, b1, kind, w2, a2, b2))
        band_end = MOONCAKE_RANDOM_BASE + npus * MOONCAKE_RANDOM_PER_NPU
        for inst in me["instances"]:
            first, last = inst["kv_ports"]
            if first < band_end and last >= MOONCAKE_RANDOM_BASE:
                warnings.append("%s: Mooncake kv ports %d-%d of dp rank %d lie inside Mooncake's random port band "
                                "[%d, %d) (AscendDirectTransport binds random ports there, 1000 per NPU): a "
                                "collision shows as 'zmq.error.ZMQError: Address already in use' (vllm-ascend "
                                "#8938). The seed chose these values; move vllm_%s_kv_port to %d or above if it "
                                "happens" % (h, first, last, inst["dp_rank"], MOONCAKE_RANDOM_BASE, band_end,
                                             me["side"], band_end))
    return errors, warnings


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
