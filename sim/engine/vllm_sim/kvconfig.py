"""Interpret --kv-transfer-config the way vLLM + vLLM-Ascend v0.18.0 do.

Supported connectors: MultiConnector (list in kv_connector_extra_config.connectors),
MooncakeConnectorV1 / MooncakeConnector / MooncakeLayerwiseConnector (P2P KV
transfer) and AscendStoreConnector (KV pool). Anything else fails like vLLM's
connector factory.
"""

import uuid
from dataclasses import dataclass, field

from vllm_sim.logutil import SimFatal

MOONCAKE_NAMES = ("MooncakeConnectorV1", "MooncakeConnector", "MooncakeLayerwiseConnector")
STORE_NAMES = ("AscendStoreConnector",)
MC_FILE = "/vllm-workspace/vllm-ascend/vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py"
UTILS_FILE = "/vllm-workspace/vllm-ascend/vllm_ascend/utils.py"


@dataclass
class MooncakeCfg:
    role: str
    kv_port: int
    extra: dict


@dataclass
class StoreCfg:
    role: str
    backend: str
    lookup_rpc_port: str
    extra: dict


@dataclass
class KVConfig:
    role: str = None
    connector: str = None
    engine_id: str = None
    mooncake: MooncakeCfg = None
    store: StoreCfg = None
    load_failure_policy: str = "fail"
    raw: dict = field(default_factory=dict)

    @property
    def is_producer(self):
        return self.role in ("kv_producer", "kv_both")

    @property
    def is_consumer(self):
        return self.role in ("kv_consumer", "kv_both")


def _int(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SimFatal("ValueError", f"invalid {what}: {value!r} (expected an integer)")


def _sub(conf, parent_role):
    name = conf.get("kv_connector")
    role = conf.get("kv_role") or parent_role
    extra = conf.get("kv_connector_extra_config") or {}
    if name in MOONCAKE_NAMES:
        return MooncakeCfg(role=role, kv_port=_int(conf.get("kv_port", 14579), "kv_port"), extra=extra)
    if name in STORE_NAMES:
        backend = str(extra.get("backend", "mooncake"))
        port = extra.get("lookup_rpc_port", extra.get("mooncake_rpc_port", 0))
        return StoreCfg(role=role, backend=backend, lookup_rpc_port=str(port), extra=extra)
    raise SimFatal("ValueError", f"Unsupported connector type: {name}",
                   frames=[("/usr/local/lib/python3.11/site-packages/vllm/distributed/kv_transfer/"
                            "kv_connector/factory.py", 61, "create_connector",
                            'raise ValueError(f"Unsupported connector type: {connector_name}")')])


def parse(raw):
    cfg = KVConfig(raw=raw or {})
    if not raw or not raw.get("kv_connector"):
        return cfg
    cfg.role = raw.get("kv_role")
    cfg.connector = raw["kv_connector"]
    cfg.engine_id = str(raw["engine_id"]) if raw.get("engine_id") is not None else str(uuid.uuid4())
    cfg.load_failure_policy = raw.get("kv_load_failure_policy") or "fail"
    if cfg.connector == "MultiConnector":
        subs = (raw.get("kv_connector_extra_config") or {}).get("connectors")
        if not subs:
            raise SimFatal("AssertionError", "connectors must be specified in kv_connector_extra_config")
        parts = [_sub(c, cfg.role) for c in subs]
    else:
        parts = [_sub(raw, cfg.role)]
    for p in parts:
        if isinstance(p, MooncakeCfg) and cfg.mooncake is None:
            cfg.mooncake = p
        elif isinstance(p, StoreCfg) and cfg.store is None:
            cfg.store = p
    return cfg


def check_parallel(cfg, tp, dp):
    """vllm_ascend.utils.check_kv_extra_config + MooncakeConnectorWorker checks.

    Real vLLM-Ascend only runs check_kv_extra_config on the top-level extra
    config, so under MultiConnector it is skipped; the simulation applies it to
    the Mooncake sub-connector (where the sizes live) so that a mismatch fails
    at startup instead of producing wrong KV routing.
    """
    mc = cfg.mooncake
    if mc is None:
        return
    extra = mc.extra

    def _check(name, conf):
        if "tp_size" in conf and _int(conf["tp_size"], f"{name}.tp_size") != tp:
            raise SimFatal(
                "ValueError",
                f"KV transfer '{name}' config has a conflicting tensor parallel size. "
                f"Expected {tp}, but got {conf['tp_size']}.",
                frames=[(UTILS_FILE, 1207, "_check", "raise ValueError(")], where="core.py:708")
        if "dp_size" in conf and _int(conf["dp_size"], f"{name}.dp_size") != dp:
            raise SimFatal(
                "ValueError",
                f"KV transfer '{name}' config has a conflicting data parallel size. "
                f"Expected {dp}, but got {conf['dp_size']}.",
                frames=[(UTILS_FILE, 1215, "_check", "raise ValueError(")])

    if mc.role in ("kv_producer", "kv_both"):
        _check("prefill", extra.get("prefill") or {})
    if mc.role in ("kv_consumer", "kv_both"):
        _check("decode", extra.get("decode") or {})

    pre = extra.get("prefill") or {}
    dec = extra.get("decode") or {}
    for conf, key, line in ((pre, "tp_size", 1165), (pre, "dp_size", 1168),
                            (dec, "tp_size", 1174), (dec, "dp_size", 1176)):
        if key not in conf:
            which = "prefill" if conf is pre else "decode"
            raise SimFatal("AssertionError", "", frames=[
                (MC_FILE, line, "_get_prefill_decode_size", f'assert "{key}" in {which}_parallel_config')])
    if _int(dec.get("pp_size", 1), "decode.pp_size") != 1:
        raise SimFatal("AssertionError", "decode pp size must be 1", frames=[
            (MC_FILE, 1180, "_get_prefill_decode_size",
             'assert self._decode_pp_size == 1, "decode pp size must be 1"')])
    ptp, dtp = _int(pre["tp_size"], "prefill.tp_size"), _int(dec["tp_size"], "decode.tp_size")
    if ptp < dtp:
        raise SimFatal(
            "ValueError",
            f"prefill_tp_size: {ptp} must be greater than or equal to the decode_tp_size: {dtp}",
            frames=[(MC_FILE, 1099, "__init__", "raise ValueError(")])
