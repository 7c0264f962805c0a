# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory validation for the A3 PD deployment: every problem of the inventory at once, each naming the host,
the variable (or the flag) and what to set.

Pure functions, no Ansible imports: the validate_inventory action and plain pytest tests call validate(). Input is
the plain dict _inventory.from_hostvars builds. Imports run one way, validation -> topology -> inventory.

The checks of a single option (type, choices, elements, bounds, paths, emptiness) come from its declaration in the
roles' argument specs (_specs, spec_rules). The modules of this package keep the rules that relate several values
or know facts of vLLM, docker, etcd and the datasystem, one module per role they protect; each rule declares the
options it reads (base.reads), which tests check against the specs.
"""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import derive
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import (
    base, common, container, etcd, gate, hugepages, monitoring, patches, placement, ports, preflight, proxy, security,
    spec_rules, supervise, vllm_env, vllm_kv, vllm_layout, vllm_run, vllm_serve, yuanrong)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import Context

# Before the topology: the groups, the addresses, the numbers the derivation reads.
INVENTORY_RULES = (common.check_groups, common.check_addresses, vllm_layout.check_numbers,
                   hugepages.check_whole_pages)
# Every prefill/decode host, after the checks its options' declarations give: rule(host, context).
HOST_RULES = (common.check_listen_addresses, hugepages.check_pages, container.check_image, container.check_names,
              container.check_devices_and_env, container.check_mounts, patches.check_table,
              patches.check_selected_row, patches.check_pins, yuanrong.check_timeouts, yuanrong.check_wheel,
              yuanrong.check_worker_flags, vllm_env.check_env_layers, vllm_env.check_hash_seed,
              vllm_env.check_derived_env, vllm_env.check_abort_timeout, vllm_serve.check_serve_flag_names,
              vllm_serve.check_serve_values, vllm_serve.check_field_prefill_flags, vllm_serve.check_token_budget,
              vllm_serve.check_served_model_name, vllm_kv.check_top_level_extra, vllm_kv.check_mooncake_extra,
              vllm_kv.check_engine_ids, supervise.check_unit_names, supervise.check_backoff,
              vllm_run.check_health_and_log, vllm_run.check_frozen_rank_bounds, preflight.check_page_and_versions, preflight.check_reserve_and_patterns,
              gate.check_expect_pattern, proxy.check_unset_env, yuanrong.check_curve)
# Across the hosts: values one deployment shares.
ACROSS_RULES = (placement.check_same_everywhere, placement.check_same_hash_seed, common.check_service_hosts_named,
                common.check_etcd_members, common.check_proxy_hosts, common.check_ha)
# Every etcd member, then every proxy host: rule(host, context).
ETCD_RULES = (etcd.check_release, etcd.check_download, etcd.check_tls_days)
PROXY_RULES = (proxy.check_extra_args, proxy.check_engine, proxy.check_relay_capacity, monitoring.check_web_users,
               monitoring.check_proxy_scrape, proxy.check_vip,
               security.check_admin_listener, security.check_api_keys, security.check_secrets)
# The layout of each side (the derivation needs them right).
LAYOUT_RULES = (vllm_layout.check_side_values, vllm_layout.check_groups_divide, vllm_layout.check_group_rpc_port)
# On the derived topology.
TOPOLOGY_RULES = (ports.check_ranges_end, vllm_layout.check_dp_addresses, vllm_layout.check_tp_order,
                  vllm_layout.check_npus_fit, vllm_layout.check_lookup_ports, ports.check_overlaps,
                  vllm_kv.check_mooncake_band)
RULES = (INVENTORY_RULES + HOST_RULES + ACROSS_RULES + ETCD_RULES + PROXY_RULES + LAYOUT_RULES + TOPOLOGY_RULES
         + (security.report_open_listeners,))
MODULES = (base, common, container, etcd, gate, hugepages, monitoring, patches, placement, ports, preflight, proxy,
           security, spec_rules, supervise, vllm_env, vllm_kv, vllm_layout, vllm_run, vllm_serve, yuanrong)


def declared_rules() -> list:
    """Every function of the package that declares what it reads (base.reads): the rules and their helpers."""
    found = {}
    for module in MODULES:
        for value in vars(module).values():
            if callable(value) and hasattr(value, "reads") and value.__module__ == module.__name__:
                found[value.__module__ + "." + value.__name__] = value
    return [found[name] for name in sorted(found)]


# Options whose type a rule checks itself, with its own wording (the spec-derived checks leave them alone).
OWN_TYPES = frozenset(name for rule in declared_rules() for name in rule.types)


def merge_hosts(messages, hosts):
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


def validate(inv: dict, allow_placeholders: bool = False, specs: dict = None):
    """Return (errors, warnings), each naming the host(s), the variable and what to set. With
    allow_placeholders (render mode) a placeholder is a warning."""
    ctx = Context(inv, allow_placeholders, _specs.load() if specs is None else specs)
    ctx.own_types = OWN_TYPES
    _run(ctx)
    hosts = set(ctx.hosts)
    return merge_hosts(ctx.errors, hosts), merge_hosts(ctx.warnings, hosts)


def _run(ctx):
    for rule in INVENTORY_RULES:
        rule(ctx)
    for name in ctx.ordered:
        h = ctx.host(name)
        spec_rules.check_options(h, ctx)
        for rule in HOST_RULES:
            rule(h, ctx)
    for rule in ACROSS_RULES:
        rule(ctx)
    _service_host_rules(ctx)
    if ctx.bad_numbers or any(not ctx.groups.get(side) for side in SIDES):
        return
    for rule in LAYOUT_RULES:
        rule(ctx)
    if ctx.inconsistent or any(len(s) > 1 for s in ctx.members.values()):
        return
    ctx.topo = derive(ctx.inv)
    for rule in TOPOLOGY_RULES:
        rule(ctx)


def _service_host_rules(ctx):
    for etcd_host in ctx.etcd_hosts():
        if etcd_host in ctx.hosts:
            for rule in ETCD_RULES:
                rule(ctx.host(etcd_host), ctx)
    proxy_hosts = [h for h in ctx.proxy_hosts() if h in ctx.hosts]
    for proxy_host in proxy_hosts:
        for rule in PROXY_RULES:
            rule(ctx.host(proxy_host), ctx)
    if proxy_hosts:
        security.report_open_listeners(ctx)
