# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the vllm role's engine environment (vllm_env_common, vllm_<side>_env, vllm_env_extra, vllm_env_unset):
what run_dp_template.sh can export, and the variables the topology derives per node and rank."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ENV_NAME_RE, Host, as_int, check_env_names, reads)

# Environment the role derives per node: run_dp_template.sh sets $local_ip, $nic_name, $ds_worker_addr and
# launch_online_dp.py passes the devices as $1. Another value breaks what the derivation guarantees.
DERIVED_ENV = {
    "HCCL_IF_IP": ("$local_ip", "the node's business IP"),
    "GLOO_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "TP_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "HCCL_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "ASCEND_RT_VISIBLE_DEVICES": ("$1", "the chips launch_online_dp.py gives each dp rank"),
    "DS_WORKER_ADDR": ("$ds_worker_addr", "this node's openYuanrong worker (<business IP>:yuanrong_worker_port)"),
}
REF_ABORT_TIMEOUT = ("vllm-ascend#7140, renamed for v0.18.0 by #8618: "
                     "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py@v0.18.0")


def _layers(h, side):
    side_layer = "vllm_%s_env" % side if side else None
    return [(name, h.get(name)) for name in ("vllm_env_common", side_layer, "vllm_env_extra") if name]


def merged_env(hv, side, specs=None):
    """The engines' environment of a host as roles/vllm/vars merges it (common, then side, then extra),
    with the variable that set each value: {name: (value, variable)}."""
    h = Host("", hv, [], [], specs)
    out = {}
    for layer, env in _layers(h, side):
        if isinstance(env, dict):
            for key, value in env.items():
                out[str(key)] = (value, layer)
    return out


@reads("vllm_env_common", "vllm_<side>_env", "vllm_env_extra", "vllm_env_unset")
def check_env_layers(h, ctx):
    """Names bash exports and values written as the text they read."""
    check_env_names(h, "vllm_env_unset")
    for layer, env in _layers(h, ctx.side_of.get(h.name)):  # a host of both groups: no side layer
        if isinstance(env, dict):
            for key, value in env.items():
                _check_env_item(h, layer, key, value)


def _check_env_item(h, layer, key, value):
    if not ENV_NAME_RE.match(str(key)):
        h.error(layer, {key: value}, "%r is not an environment variable name (bash refuses 'export' of it "
                "when the engines start): set a name of letters, digits and '_'" % key)
    elif not isinstance(value, str):
        # run_dp_template.sh writes export KEY="<value>": YAML true/false come out as True/False, null as
        # None, 010 as 8, 1e3 as 1000.0.
        example = "1" if value is True else "0" if value is False else "" if value is None else value
        h.error(layer, {key: value}, "environment values are written as text, and unquoted YAML numbers, "
                "booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set "
                "it quoted, e.g. %s: \"%s\"" % (key, example))


def _unset(h):
    unset = h.get("vllm_env_unset")
    return set(unset) if isinstance(unset, list) else set()


def _side_env(h, ctx):
    """(side, merged environment, unset names) of an engine host with an environment layer to judge, else None."""
    side = ctx.side_of.get(h.name)
    if side is None or not any(isinstance(env, dict) for _unused, env in _layers(h, side)):
        return None
    return side, merged_env(h.hv, side, h.specs), _unset(h)


@reads("vllm_env_common", "vllm_<side>_env", "vllm_env_extra", "vllm_env_unset")
def check_hash_seed(h, ctx):
    found = _side_env(h, ctx)
    if found is None:
        return
    side, env, unset = found
    layers = "vllm_env_common + vllm_%s_env + vllm_env_extra" % side
    seed = env.get("PYTHONHASHSEED")
    if "PYTHONHASHSEED" in unset:
        h.error("vllm_env_unset", sorted(unset), "it removes PYTHONHASHSEED, so every engine hashes KV blocks with "
                "its own random seed and the pool never hits: take PYTHONHASHSEED out of vllm_env_unset")
    elif seed is None:
        h.error("PYTHONHASHSEED (%s)" % layers, None, "vLLM seeds its KV block hashes from it, without it every "
                "engine hashes differently and the pool never hits: set PYTHONHASHSEED: \"0\" in vllm_env_common")
    else:
        number = as_int(seed[0])  # an unquoted number is reported by the per-layer rule
        if number is None or not 0 <= number <= 4294967295:
            h.error("PYTHONHASHSEED (%s, set in %s)" % (layers, seed[1]), seed[0], "Python accepts 'random' or an "
                    "integer 0..4294967295 and the pool needs one fixed value: set a quoted integer, e.g. \"0\"")


@reads("vllm_env_common", "vllm_<side>_env", "vllm_env_extra", "vllm_env_unset", "vllm_kv_pool_backend",
       choices={"vllm_kv_pool_backend": ("yuanrong",)})
def check_derived_env(h, ctx):
    found = _side_env(h, ctx)
    if found is None:
        return
    side, env, unset = found
    layers = "vllm_env_common + vllm_%s_env + vllm_env_extra" % side
    for key, (ref, what) in sorted(DERIVED_ENV.items()):
        if key == "DS_WORKER_ADDR" and h.get("vllm_kv_pool_backend") != "yuanrong":
            continue
        got = env.get(key)
        value = got[0] if got else None
        if key in unset:
            msg = "vllm_env_unset removes it; the engines need %s there" % what
            (h.error if key == "DS_WORKER_ADDR" else h.warn)(
                "vllm_env_unset", sorted(unset), "%s (%s): take %s out of vllm_env_unset" % (msg, key, key))
        elif got is None and key == "DS_WORKER_ADDR":
            h.error("DS_WORKER_ADDR (%s)" % layers, None, "the yuanrong pool backend reads this node's worker "
                    "address from it and stops without it: set DS_WORKER_ADDR: $ds_worker_addr in vllm_env_common")
        elif got is None:
            h.warn("%s (%s)" % (key, layers), None, "the seed sets it to %s (%s): set %s: %s in vllm_env_common"
                   % (ref, what, key, ref))
        elif isinstance(value, str) and value.replace("${", "$").replace("}", "") != ref:
            h.warn("%s (set in %s)" % (key, got[1]), value, "it replaces the derived %s (%s), which the topology "
                   "keeps right per node and rank: remove it from %s unless this is intended" % (ref, what, got[1]))


@reads("vllm_env_common", "vllm_<side>_env", "vllm_env_extra", "vllm_env_unset")
def check_abort_timeout(h, ctx):
    found = _side_env(h, ctx)
    if found is None:
        return
    _side, env, unset = found
    nixl, mooncake = "VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"
    if nixl in env and nixl not in unset and (mooncake not in env or mooncake in unset):
        # vllm-ascend v0.18.0's Mooncake connector frees a finished request's KV blocks on the prefill side after
        # VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (vLLM's envs, default 480 s); the NIXL variable is read by NixlConnector.
        h.warn("%s (set in %s)" % (nixl, env[nixl][1]), env[nixl][0], "the Mooncake connector does not read it: it "
               "reads %s (default 480 s), so the prefill side frees the KV blocks of a request decode never pulled "
               "after 480 s, not after this (%s): set %s in vllm_env_common (seconds, e.g. \"480\")"
               % (mooncake, REF_ABORT_TIMEOUT, mooncake))
