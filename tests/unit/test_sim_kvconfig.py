# -*- coding: utf-8 -*-
"""The engine simulator's kv-transfer-config parser (sim/engine/vllm_sim/kvconfig.py) reads what
plugins/module_utils/_kv_transfer.py builds, with the KV pool on (MultiConnector) and off (plain Mooncake)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _kv_transfer as K

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "engine"))
from vllm_sim import kvconfig  # noqa: E402  pylint: disable=wrong-import-position
from vllm_sim.logutil import SimFatal  # noqa: E402  pylint: disable=wrong-import-position

MOONCAKE = {"prefill": {"dp_size": 2, "tp_size": 16}, "decode": {"dp_size": 2, "tp_size": 16}}


def built(side, pool_enabled, **kw):
    return K.build(side, 30000 if side == "prefill" else 30100, MOONCAKE, 1, 2, 16, engine_id="0",
                   mooncake_extra={"use_ascend_direct": True}, pool_enabled=pool_enabled, **kw)


def test_pool_on_parses_to_mooncake_and_store():
    cfg = kvconfig.parse(built("prefill", True))
    assert cfg.connector == "MultiConnector" and cfg.is_producer
    assert cfg.mooncake.kv_port == 30000 and cfg.mooncake.extra["prefill"] == {"dp_size": 2, "tp_size": 16}
    assert cfg.store is not None and cfg.store.backend == "yuanrong" and cfg.store.lookup_rpc_port == "1"
    kvconfig.check_parallel(cfg, 16, 2)


def test_pool_off_parses_to_mooncake_alone():
    for side, port in (("prefill", 30000), ("decode", 30100)):
        cfg = kvconfig.parse(built(side, False, top_level_extra={"kv_load_failure_policy": "recompute"}))
        assert cfg.connector == "MooncakeConnectorV1"
        assert cfg.store is None, "pool off: the engine must have no store connector (it would query the pool)"
        assert cfg.mooncake.kv_port == port and cfg.mooncake.role == K.ROLES[side]
        assert cfg.mooncake.extra["decode"] == {"dp_size": 2, "tp_size": 16}
        assert cfg.load_failure_policy == "recompute" and cfg.engine_id == "0"
        kvconfig.check_parallel(cfg, 16, 2)


def test_pool_off_parallel_mismatch_still_fails():
    cfg = kvconfig.parse(built("prefill", False))
    with pytest.raises(SimFatal, match="conflicting tensor parallel size. Expected 8, but got 16"):
        kvconfig.check_parallel(cfg, 8, 2)
