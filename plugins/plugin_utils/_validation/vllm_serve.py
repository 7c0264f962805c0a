# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the vllm role's serve flags (vllm_serve_args_common, vllm_<side>_serve_args): flags
run_dp_template.sh writes itself, values in a syntax vLLM 0.18's `vllm serve` refuses when it parses its command
line (named by their flag), and what the field found wrong with the seed's values (issue 16).

The role writes a flag as ascend.vllm_pd.serve_flag_pairs does: true gives the bare flag, false and null leave
it out, a mapping or a list becomes JSON text, anything else its text."""
from __future__ import annotations

import json
import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    FLAG_RE, as_bool, as_float, as_int, as_mapping, reads, templated)

# vllm serve flags run_dp_template.sh writes itself (from launch_online_dp.py's positional arguments and the
# kv-transfer-config file) or that clash with them; _render.engine_processes shows the same list.
LAUNCHER_FLAGS = ("host", "port", "tensor-parallel-size", "kv-transfer-config", "model")
LAUNCHER_FLAG_PREFIXES = ("data-parallel-",)
# max-model-len: vLLM reads a plain integer, a human-readable one (1k, 25.6k, 1M) or -1 / auto (fit to memory).
_MODEL_LEN_RE = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?[kKmMgG]?|-1|auto)$")
# Integer flags of vLLM 0.18 (argparse type int) and the least value it runs with.
INT_FLAGS = {"max-num-seqs": 1, "max-num-batched-tokens": 1, "block-size": 1, "seed": 0,
             "num-gpu-blocks-override": 1}
# Boolean flags of vLLM 0.18 (store_true, or --flag/--no-flag): a value after the flag is an extra argument
# ("unrecognized arguments"), so only true (the bare flag) and false (left out) write a valid command line.
BOOL_FLAGS = ("enforce-eager", "trust-remote-code", "enable-expert-parallel", "enable-prefix-caching",
              "enable-chunked-prefill", "async-scheduling", "enable-auto-tool-choice", "disable-log-stats",
              "enable-eplb", "disable-custom-all-reduce", "skip-tokenizer-init")
# vLLM parses a *-config flag and --hf-overrides as JSON (a mapping); --generation-config is a string (auto, vllm
# or a directory), and --compilation-config also takes an optimization level (an integer).
JSON_FLAGS = ("hf-overrides",)
NOT_JSON_FLAGS = ("generation-config",)
REF_SPEC_PREFILL = "vllm-ascend#12104; GLM-5 tool calls with 3: vllm-ascend#7580"
REF_RECOMPUTE = ("vllm-ascend#11265: accuracy issue on P nodes, rejected there from v0.23.0; #11537 then ignores it "
                 "on kv_producer with a warning")
REF_BATCHED = "vLLM v0.18.0: vllm/config/scheduler.py"
REF_BATCHED_SPEC = ("vLLM v0.18.0: vllm/v1/core/sched/scheduler.py token budget, vllm/config/vllm.py graph sizes; "
                    "vllm-ascend#8240")


def _is_launcher_flag(flag):
    flag = flag.replace("_", "-")
    return flag in LAUNCHER_FLAGS or flag.startswith(LAUNCHER_FLAG_PREFIXES)


def _layers(h, side):
    side_layer = "vllm_%s_serve_args" % side if side else None
    return [(name, h.get(name)) for name in ("vllm_serve_args_common", side_layer) if name]


def _flag_name_problem(flag_s):
    if flag_s.startswith("-"):
        return ("the role adds the dashes itself (this becomes --%s): set the flag as %s"
                % (flag_s, flag_s.lstrip("-")))
    if not FLAG_RE.match(flag_s):
        return "%r is not a vllm serve flag name: set the long flag without dashes, e.g. max-model-len" % flag_s
    if _is_launcher_flag(flag_s):
        return ("run_dp_template.sh sets --%s itself (from launch_online_dp.py and the topology), a second one "
                "conflicts: remove it and set the inventory variable instead (vllm_api_port, vllm_dp_*, "
                "vllm_<side>_tp_size, a3_listen_address, vllm_model_path, vllm_<side>_kv_port)" % flag_s)
    return None


def merged_flags(h, side, report=False):
    """{flag: (value, layer)} of one side, the side's layer over the common one (the role's combine); with
    report, a flag name the role cannot write is an error."""
    merged = {}
    for layer, args in _layers(h, side):
        if not isinstance(args, dict):
            continue
        for flag, value in args.items():
            problem = _flag_name_problem(str(flag))
            if problem and report:
                h.error(layer, {flag: value}, problem)
            if not problem:
                merged[str(flag).replace("_", "-")] = (value, layer)
    return merged


@reads("vllm_serve_args_common", "vllm_<side>_serve_args")
def check_serve_flag_names(h, ctx):
    merged_flags(h, ctx.side_of.get(h.name), report=True)


def _int_flag_problem(flag, value):
    number, least = as_int(value), INT_FLAGS[flag]
    if number is None or number < least:
        return "set a positive integer" if least == 1 else "set an integer >= %d" % least
    return None


def _json_flag_problem(flag, value):
    parsed = as_mapping(value)
    if parsed is None and not (flag == "compilation-config" and as_int(value) is not None):
        return "vLLM reads --%s as JSON: set a mapping, e.g. %s: {key: value}" % (flag, flag)
    if flag == "speculative-config" and parsed is not None:
        tokens = parsed.get("num_speculative_tokens", 1)
        if as_int(tokens) is None or as_int(tokens) < 1:
            return ("num_speculative_tokens must be a positive integer: set e.g. "
                    "{num_speculative_tokens: 3, method: deepseek_mtp}")
    return None


def value_problem(flag, value):
    """Why vLLM 0.18 refuses this value of a flag it parses (int, float, boolean, JSON), or None."""
    if flag == "max-model-len":
        if isinstance(value, bool) or not _MODEL_LEN_RE.match(str(value)) or as_int(value) == 0 \
                or (as_int(value) is not None and as_int(value) < -1):
            return "set a positive token count (e.g. 202752, 128k), or -1/auto"
    elif flag in INT_FLAGS:
        return _int_flag_problem(flag, value)
    elif flag == "gpu-memory-utilization":
        number = as_float(value)
        if number is None or not 0 < number <= 1:
            return "set the fraction of NPU memory vLLM may use, above 0 and at most 1 (e.g. 0.9)"
    elif flag in BOOL_FLAGS and value is not True:
        return ("vllm serve takes --%s without a value (a value after it is an argument vLLM does not know): set true "
                "(the bare flag) or false (left out), unquoted" % flag)
    elif (flag.endswith("-config") and flag not in NOT_JSON_FLAGS) or flag in JSON_FLAGS:
        return _json_flag_problem(flag, value)
    return None


@reads("vllm_serve_args_common", "vllm_<side>_serve_args")
def check_serve_values(h, ctx):
    side = ctx.side_of.get(h.name)
    if side is None:
        return
    for flag, (value, layer) in sorted(merged_flags(h, side).items()):
        if templated(value) or value is None or value is False:
            continue
        problem = value_problem(flag, value)
        if problem:
            h.error(layer, {flag: value}, problem)


@reads("vllm_serve_args_common", "vllm_<side>_serve_args", "vllm_served_model_name")
def check_served_model_name(h, ctx):
    side = ctx.side_of.get(h.name)
    if side is None or not any(isinstance(args, dict) for _unused, args in _layers(h, side)):
        return
    name = merged_flags(h, side).get("served-model-name")
    want = h.get("vllm_served_model_name")
    if isinstance(want, str) and want and name is None:
        h.error("vllm_serve_args_common", None, "served-model-name is missing, so vLLM names the model after its "
                "path and requests for %r (gate, canary, clients) get 404: set served-model-name: \"{{ "
                "vllm_served_model_name }}\"" % want)
    elif isinstance(want, str) and name is not None and not templated(name[0]) and str(name[0]) != want:
        h.error(name[1], {"served-model-name": name[0]}, "vllm_served_model_name is %r, which the gate, the canary "
                "and the proxy's clients send: set served-model-name: \"{{ vllm_served_model_name }}\"" % want)


def _parsed(merged, flag):
    value, layer = merged.get(flag, (None, None))
    return (None if templated(value) else as_mapping(value)), value, layer


@reads("vllm_serve_args_common", "vllm_<side>_serve_args")
def check_field_prefill_flags(h, ctx):
    """Rules from the field on the prefill side's flags (common combined with the side's: the role's combine is
    shallow, so a side's speculative-config or additional-config replaces the common mapping whole)."""
    if ctx.side_of.get(h.name) != "prefill":
        return
    merged = merged_flags(h, "prefill")
    spec, spec_value, spec_layer = _parsed(merged, "speculative-config")
    tokens = as_int(spec.get("num_speculative_tokens", 1)) if spec is not None else 0
    # A prefill node only fills the KV cache and drafts nothing; vllm-ascend's PD guide asks for 1 there for
    # models other than hybrid Mamba ones (GLM-5.1 is not), and GLM-5 tool calls broke with 3.
    if tokens is not None and tokens > 1:
        h.warn(spec_layer, {"speculative-config": spec_value}, "num_speculative_tokens %d on the prefill side, which "
               "drafts nothing: upstream asks for 1 on P nodes of models that are not hybrid Mamba (GLM-5.1 is not), "
               "and GLM-5 tool-call arguments came out as broken JSON with more (%s): set speculative-config: %s in "
               "vllm_prefill_serve_args" % (tokens, REF_SPEC_PREFILL, json.dumps(dict(spec, num_speculative_tokens=1))))
    extra, extra_value, extra_layer = _parsed(merged, "additional-config")
    # vllm-ascend v0.18.0 (platform.py) installs the recompute scheduler on kv_producer as well as kv_consumer.
    if extra is not None and as_bool(extra.get("recompute_scheduler_enable")):
        rest = {k: v for k, v in extra.items() if k != "recompute_scheduler_enable"}
        h.warn(extra_layer, {"additional-config": extra_value}, "recompute_scheduler_enable is on for the prefill "
               "side, where vllm-ascend v0.18.0 still runs the recompute scheduler and upstream found wrong answers; "
               "it belongs on decode (kv_consumer) only (%s): set additional-config: %s in vllm_prefill_serve_args "
               "(the whole mapping: it replaces the common one)" % (REF_RECOMPUTE, json.dumps(rest)))


@reads("vllm_serve_args_common", "vllm_<side>_serve_args")
def check_token_budget(h, ctx):
    """max-num-batched-tokens against max-num-seqs (and a decode step's speculative tokens)."""
    side = ctx.side_of.get(h.name)
    if side is None:
        return
    merged = merged_flags(h, side)
    spec = _parsed(merged, "speculative-config")[0]
    tokens = as_int(spec.get("num_speculative_tokens", 1)) if spec is not None else 0
    seqs = as_int(merged.get("max-num-seqs", (None,))[0])
    batched = as_int(merged.get("max-num-batched-tokens", (None,))[0])
    if not (seqs and batched and seqs > 0 and batched > 0):
        return  # unset (vLLM's defaults fit) or reported by the per-flag rule
    label = "vllm_serve_args_common + vllm_%s_serve_args" % side
    shown = {"max-num-seqs": seqs, "max-num-batched-tokens": batched}
    if batched < seqs:
        # SchedulerConfig refuses it: the engine does not start.
        h.error(label, shown, "vLLM refuses to start when max-num-batched-tokens is below max-num-seqs (%s): set "
                "max-num-batched-tokens to at least %d or max-num-seqs to at most %d" % (REF_BATCHED, seqs, batched))
    elif side == "decode" and tokens and batched < seqs * (1 + tokens):
        # Each decode request schedules 1 + num_speculative_tokens tokens a step within the budget of
        # max-num-batched-tokens, which also caps the decode graph sizes.
        shown["num_speculative_tokens"] = tokens
        h.warn(label, shown, "a full decode batch needs max-num-seqs x (1 + num_speculative_tokens) = %d tokens a "
               "step, but the step budget is max-num-batched-tokens, so only %d requests get all their tokens a step "
               "and the decode graphs stop at %d (%s): set max-num-batched-tokens to %d (seed: 8 x (1 + 3) = 32) or "
               "lower max-num-seqs to %d" % (seqs * (1 + tokens), batched // (1 + tokens), batched,
                                             REF_BATCHED_SPEC, seqs * (1 + tokens), max(1, batched // (1 + tokens))))
