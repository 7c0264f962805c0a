# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the vllm role's kv-transfer-config (vllm_kv_top_level_extra, vllm_mooncake_extra_config,
vllm_<side>_engine_id) and of the Mooncake kv ports on the derived topology."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    MOONCAKE_RANDOM_BASE, MOONCAKE_RANDOM_PER_NPU)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, reads, templated

# Field rules (issue 16): facts of vLLM 0.18.0 and vllm-ascend v0.18.0 that broke deployments upstream.
# vllm/config/kv_transfer.py@v0.18.0: kv_load_failure_policy is Literal["recompute", "fail"] (default fail).
KV_LOAD_FAILURE_POLICIES = ("recompute", "fail")
REF_FAILURE_POLICY = ("vLLM v0.18.0: vllm/v1/core/sched/scheduler.py reads kv_transfer_config.kv_load_failure_policy of "
                      "the top level; multi_connector.py builds each child from its own dict")


@reads("vllm_kv_top_level_extra")
def check_top_level_extra(h, ctx):
    top = h.get("vllm_kv_top_level_extra")
    if not isinstance(top, dict):
        return
    for key in top:
        if key in ("kv_connector", "kv_role"):
            h.error("vllm_kv_top_level_extra", {key: top[key]}, "it replaces the MultiConnector's own %s, which "
                    "breaks the P/D transfer and the pool: remove it" % key)
        elif key in ("kv_connector_extra_config", "engine_id"):
            h.warn("vllm_kv_top_level_extra", {key: top[key]}, "%s is derived (%s): remove it" % (
                key, "the connector list is written over it" if key != "engine_id"
                else "set vllm_<side>_engine_id instead"))
    policy = top.get("kv_load_failure_policy", KV_LOAD_FAILURE_POLICIES[0])
    if policy not in KV_LOAD_FAILURE_POLICIES and not templated(policy):
        h.error("vllm_kv_top_level_extra", {"kv_load_failure_policy": policy}, "vLLM 0.18.0 "
                "accepts only %s and refuses to start otherwise (vllm/config/kv_transfer.py@v0.18.0): set one of them"
                % " or ".join(KV_LOAD_FAILURE_POLICIES))


@reads("vllm_mooncake_extra_config")
def check_mooncake_extra(h, ctx):
    mc = h.get("vllm_mooncake_extra_config")
    if not isinstance(mc, dict):
        return
    # The scheduler reads the policy of the MultiConnector (top level) only; in the Mooncake child's extra config
    # nothing reads it and the policy stays 'fail'.
    if "kv_load_failure_policy" in mc:
        h.error("vllm_mooncake_extra_config", {"kv_load_failure_policy": mc["kv_load_failure_policy"]}, "it lands in "
                "the Mooncake child connector's kv_connector_extra_config, where nothing reads it, so failed KV loads "
                "still fail the request (%s): remove it here and set it in vllm_kv_top_level_extra" % REF_FAILURE_POLICY)
    for key in SIDES:  # the derived blocks are named after the sides
        if key in mc:
            h.warn("vllm_mooncake_extra_config", {key: mc[key]}, "the %s dp/tp block is derived from the "
                   "topology and replaces this: remove it" % key)


@reads("vllm_<side>_engine_id")
def check_engine_ids(h, ctx):
    for side in SIDES:
        key = "vllm_%s_engine_id" % side
        value = h.get(key)
        if value is not ABSENT and value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            h.error(key, value, "set a quoted string (seed: \"0\" on prefill) or null")


@reads("vllm_<side>_kv_port", "a3_npus_per_node")
def check_mooncake_band(ctx):
    """Kv ports inside the band Mooncake's AscendDirectTransport binds random ports in (warnings)."""
    for h in ctx.ordered:
        me = ctx.topo["hosts"][h]
        band_end = MOONCAKE_RANDOM_BASE + int(ctx.hosts[h]["a3_npus_per_node"]) * MOONCAKE_RANDOM_PER_NPU
        for inst in me["instances"]:
            first, last = inst["kv_ports"]
            if first < band_end and last >= MOONCAKE_RANDOM_BASE:
                ctx.warnings.append("%s: Mooncake kv ports %d-%d of dp rank %d lie inside Mooncake's random port band "
                                    "[%d, %d) (AscendDirectTransport binds random ports there, 1000 per NPU): a "
                                    "collision shows as 'zmq.error.ZMQError: Address already in use' (vllm-ascend "
                                    "#8938). The seed chose these values; move vllm_%s_kv_port to %d or above if it "
                                    "happens" % (h, first, last, inst["dp_rank"], MOONCAKE_RANDOM_BASE, band_end,
                                                 me["side"], band_end))
