# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Assemble vLLM's --kv-transfer-config for one engine instance (pure functions).

MultiConnector = MooncakeConnectorV1 (P->D KV transfer) + AscendStoreConnector (KV pool).
Under MultiConnector vLLM skips its own consistency checks, so check_mooncake() does them.
With the pool off (pool_enabled=False) the config is a plain MooncakeConnectorV1, the form of vllm-ascend
v0.18.0's PD guide (docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md): the
Mooncake connector's keys at the top level, no AscendStoreConnector, so no engine queries the pool.
"""
from __future__ import annotations

import json

ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}
POOL_BACKENDS_V0180 = ("mooncake", "memcache")


# Keys build() computes; an extra dict that names one would silently replace (or be replaced by) them.
COMPUTED_KEYS = {
    "mooncake_extra": ("prefill", "decode"),
    "pool_extra": ("lookup_rpc_port", "backend"),
    "top_level_extra": ("kv_connector", "kv_role", "engine_id", "kv_connector_extra_config"),
}


class KvConfigError(ValueError):
    pass


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_mooncake(mooncake: dict, side: str, dp_size: int, tp_size: int):
    """Errors of the Mooncake prefill/decode blocks against this instance's own dp/tp."""
    errors = []
    for key in ("prefill", "decode"):
        block = mooncake.get(key) or {}
        for field in ("dp_size", "tp_size"):
            if not _positive_int(block.get(field)):
                errors.append("mooncake.%s.%s must be a positive integer, got %r" % (key, field, block.get(field)))
    if errors:
        return errors
    if mooncake["prefill"]["tp_size"] < mooncake["decode"]["tp_size"]:
        errors.append("prefill tp_size %d < decode tp_size %d: Mooncake requires prefill tp >= decode tp"
                      % (mooncake["prefill"]["tp_size"], mooncake["decode"]["tp_size"]))
    own = mooncake[side]
    if (own["dp_size"], own["tp_size"]) != (dp_size, tp_size):
        errors.append("mooncake.%s says dp %d / tp %d but this %s instance runs dp %d / tp %d"
                      % (side, own["dp_size"], own["tp_size"], side, dp_size, tp_size))
    return errors


def build(side: str, kv_port: int, mooncake: dict, lookup_rpc_port, dp_size: int, tp_size: int,
          engine_id=None, pool_backend="yuanrong", mooncake_extra=None, mooncake_module_path=None,
          pool_extra=None, top_level_extra=None, pool_enabled=True) -> dict:
    """Return the kv-transfer-config dict for one instance of `side` ('prefill' or 'decode').

    pool_enabled=False leaves the AscendStoreConnector out: a plain MooncakeConnectorV1 config
    (top_level_extra merged into it); pool_extra must then be empty (it would silently do nothing)."""
    if side not in ROLES:
        raise KvConfigError("side must be 'prefill' or 'decode', got %r" % (side,))
    errors = check_mooncake(mooncake, side, dp_size, tp_size)
    # instance dp_rank listens on kv_port + dp_rank * tp .. + tp - 1: the last port is kv_port + dp * tp - 1
    if not isinstance(kv_port, int) or isinstance(kv_port, bool) or not 1 <= kv_port <= 65536 - dp_size * tp_size:
        errors.append("kv_port %r is not a usable TCP port for %d instances x tp %d" % (kv_port, dp_size, tp_size))
    for name, extra in (("mooncake_extra", mooncake_extra), ("pool_extra", pool_extra),
                        ("top_level_extra", top_level_extra)):
        clash = [key for key in COMPUTED_KEYS[name] if key in (extra or {})]
        if clash:
            errors.append("%s may not set %s (computed from the topology)" % (name, ", ".join(clash)))
    if not isinstance(pool_enabled, bool):
        errors.append("pool_enabled must be true or false, got %r" % (pool_enabled,))
    elif not pool_enabled and pool_extra:
        errors.append("pool_extra %r is set but the KV pool is off (pool_enabled false): no AscendStoreConnector "
                      "would read it" % (pool_extra,))
    if not pool_enabled and top_level_extra:
        clash = [key for key in ("kv_port", "kv_connector_module_path") if key in top_level_extra]
        if clash:
            errors.append("top_level_extra may not set %s with the pool off (the Mooncake connector's own keys "
                          "are the top level then)" % ", ".join(clash))
    if errors:
        raise KvConfigError("; ".join(errors))
    role = ROLES[side]
    mc_extra = dict(mooncake_extra or {})
    mc_extra["prefill"] = dict(mooncake["prefill"])
    mc_extra["decode"] = dict(mooncake["decode"])
    mc = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(kv_port)}
    if mooncake_module_path:
        mc["kv_connector_module_path"] = mooncake_module_path
    mc["kv_connector_extra_config"] = mc_extra
    if not pool_enabled:
        config = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": mc["kv_port"]}
        if engine_id is not None:
            config["engine_id"] = str(engine_id)
        if mooncake_module_path:
            config["kv_connector_module_path"] = mooncake_module_path
        config.update(top_level_extra or {})
        config["kv_connector_extra_config"] = mc_extra
        return config
    store_extra = {"lookup_rpc_port": str(lookup_rpc_port), "backend": pool_backend}
    store_extra.update(pool_extra or {})
    store = {"kv_connector": "AscendStoreConnector", "kv_role": role, "kv_connector_extra_config": store_extra}
    config = {"kv_connector": "MultiConnector", "kv_role": role}
    if engine_id is not None:
        config["engine_id"] = str(engine_id)
    config.update(top_level_extra or {})
    config["kv_connector_extra_config"] = {"connectors": [mc, store]}
    return config


def build_instances(lookup_rpc_ports, side: str, kv_port: int, mooncake: dict, dp_size: int, tp_size: int,
                    **options) -> list:
    """The configs of every instance of one host, in the order of lookup_rpc_ports (one per instance; they tell
    the instances apart and must be unique, as each is the suffix of a local IPC socket). Same options as build.
    Returns [{"lookup_rpc_port", "config", "json"}]."""
    ports = [str(p) for p in lookup_rpc_ports] if isinstance(lookup_rpc_ports, (list, tuple)) else None
    if not ports:
        raise KvConfigError("lookup_rpc_ports must be a non-empty list (one per instance), got %r" % (lookup_rpc_ports,))
    repeated = sorted(set(p for p in ports if ports.count(p) > 1))
    if repeated:
        raise KvConfigError("lookup_rpc_port %s repeats on the host: its instances would share the pool's IPC "
                            "socket" % ", ".join(repeated))
    out = []
    for port in ports:
        config = build(side, kv_port, mooncake, port, dp_size, tp_size, **options)
        out.append({"lookup_rpc_port": port, "config": config, "json": to_json(config)})
    return out


# The file of each instance in the host's work directory: run_dp_template.sh (rendered by the vllm role) passes
# "$(cat kv_transfer_config_dp$4.json)" to vllm serve, $4 being the instance's dp rank.
FILE_NAME = "kv_transfer_config_dp%d.json"
FILE_MODE = "0644"


def _dp_rank(instance):
    """An instance's dp rank as an int (an int, or its decimal text), else None."""
    rank = instance.get("dp_rank") if isinstance(instance, dict) else None
    if isinstance(rank, str) and rank.isdigit():
        return int(rank)
    if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
        return rank
    return None


def check_instances(instances, work_dir) -> list:
    """The dp ranks of the host's instances (a3_self.instances: dicts with dp_rank and lookup_rpc_port), in their
    order; raises KvConfigError when one lacks them, two share a rank (the same file) or work_dir is not absolute."""
    errors = []
    if not isinstance(work_dir, str) or not work_dir.startswith("/"):
        errors.append("work_dir must be an absolute path, got %r" % (work_dir,))
    if not isinstance(instances, (list, tuple)) or not instances:
        raise KvConfigError("; ".join(errors + ["instances must be a non-empty list (one per engine instance), "
                                                "got %r" % (instances,)]))
    ranks = [_dp_rank(inst) for inst in instances]
    for number, (inst, rank) in enumerate(zip(instances, ranks)):
        if rank is None:
            errors.append("instance %d has no dp_rank (a non-negative integer): %r" % (number, inst))
        elif inst.get("lookup_rpc_port") in (None, ""):
            errors.append("instance %d (dp rank %d) has no lookup_rpc_port" % (number, rank))
    repeated = sorted(set(r for r in ranks if r is not None and ranks.count(r) > 1))
    if repeated:
        errors.append("dp ranks %s repeat: two instances would write the same %s"
                      % (", ".join(str(r) for r in repeated), FILE_NAME % repeated[0]))
    if errors:
        raise KvConfigError("; ".join(errors))
    return ranks


def instance_files(instances, work_dir: str, side: str, kv_port: int, mooncake: dict, dp_size: int, tp_size: int,
                   **options) -> dict:
    """What the engines of one host read: the kv-transfer-config file of each instance, in instance order, as
    the files module writes it ({dest, content, mode}: work_dir/kv_transfer_config_dp<rank>.json, the compact JSON
    and a newline), the same JSON by dp rank ({"<rank>": json}, the render plan's argv) and the notes.
    Same options as build; the instances differ only in their lookup_rpc_port."""
    ranks = check_instances(instances, work_dir)
    configs = build_instances([inst["lookup_rpc_port"] for inst in instances], side, kv_port, mooncake, dp_size,
                              tp_size, **options)
    base = work_dir.rstrip("/") + "/"
    return {
        "files": [{"dest": base + FILE_NAME % rank, "content": entry["json"] + "\n", "mode": FILE_MODE}
                  for rank, entry in zip(ranks, configs)],
        "by_rank": dict((str(rank), entry["json"]) for rank, entry in zip(ranks, configs)),
        # every instance's config differs only in lookup_rpc_port: the first one's notes are everyone's
        "notes": notes(configs[0]["config"]),
    }


def notes(config: dict, npus_per_node: int = 16):
    """Advisory notes (not errors) about a built config: vllm-ascend v0.18.0's AscendStoreConnector knows only the
    mooncake and memcache backends (yuanrong is upstream from v0.19.1rc1, vllm-ascend PR 6869)."""
    out = []
    for conn in config["kv_connector_extra_config"].get("connectors", [config]):
        extra = conn.get("kv_connector_extra_config", {})
        if conn["kv_connector"] == "AscendStoreConnector" and extra.get("backend") not in POOL_BACKENDS_V0180:
            out.append("pool backend %r is not in vllm-ascend v0.18.0 (only %s): the yuanrong backend patch "
                       "must be applied (role patches)" % (extra.get("backend"), ", ".join(POOL_BACKENDS_V0180)))
    return out


def to_json(config: dict) -> str:
    """Deterministic JSON text (key order as built, compact separators)."""
    return json.dumps(config, separators=(",", ":"))
