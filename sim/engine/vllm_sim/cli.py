"""``vllm`` command line (only ``serve``), argparse-compatible with the flags
the deployment uses. Unknown flags and malformed JSON exit 2 with usage."""

import argparse
import json
import re
import sys

from vllm_sim import __version__

KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")


def _json_object(flag, allow_int=False):
    def parse(text):
        if allow_int and re.fullmatch(r"\s*-?\d+\s*", text or ""):
            return {"level": int(text)}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(
                f"invalid JSON for {flag}: {e.msg} (line {e.lineno} column {e.colno}): {text!r}")
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(
                f"invalid value for {flag}: expected a JSON object, got {type(value).__name__}: {text!r}")
        return value

    parse.__name__ = "json"
    return parse


def _kv_transfer_config(text):
    value = _json_object("--kv-transfer-config")(text)
    # vLLM validates KVTransferConfig while parsing the argument (pydantic),
    # so these errors are argparse errors too.
    role = value.get("kv_role")
    if value.get("kv_connector") is not None and role is None:
        raise argparse.ArgumentTypeError(
            "Value error, Please specify kv_role when kv_connector is set, "
            f"supported roles are {list(KV_ROLES)}")
    if role is not None and role not in KV_ROLES:
        raise argparse.ArgumentTypeError(
            f"Value error, Unsupported kv_role: {role}. Supported roles are {list(KV_ROLES)}")
    policy = value.get("kv_load_failure_policy")
    if policy is not None and policy not in ("recompute", "fail"):
        raise argparse.ArgumentTypeError(
            f"Input should be 'recompute' or 'fail' [input_value={policy!r}] (kv_load_failure_policy)")
    return value


def _human_int(text):
    """vLLM accepts 1k / 32K / 1m style values for --max-model-len."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text or "")
    if not m:
        raise argparse.ArgumentTypeError(f"invalid human-readable integer: {text!r}")
    num, suffix = m.groups()
    mult = {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 1024**2, "g": 10**9, "G": 1024**3}[suffix]
    return int(float(num) * mult)


def _port(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="vllm", description="vLLM CLI (simulated engine for the A3 PD simulation)",
        allow_abbrev=False)
    parser.add_argument("-v", "--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="subcommand", metavar="{serve}")
    s = sub.add_parser(
        "serve", prog="vllm serve", usage="vllm serve [model_tag] [options]", allow_abbrev=False,
        help="Start the vLLM OpenAI Compatible API server.",
        description="Start the vLLM OpenAI Compatible API server (simulated).")
    s.add_argument("model_tag", nargs="?", default=None, help="The model tag (path) to serve.")
    s.add_argument("--model", default=None, help="Model path (alternative to model_tag).")
    # Frontend
    s.add_argument("--host", default=None)
    s.add_argument("--port", type=_port, default=8000)
    s.add_argument("--served-model-name", nargs="+", default=None)
    s.add_argument("--api-key", nargs="+", default=None)   # vLLM 0.18: a list, any one of them is accepted
    s.add_argument("--enable-auto-tool-choice", action="store_true")
    s.add_argument("--tool-call-parser", default=None)
    s.add_argument("--reasoning-parser", default=None)
    s.add_argument("--disable-log-stats", action="store_true")
    s.add_argument("--enable-log-requests", action="store_true")
    s.add_argument("--disable-uvicorn-access-log", action="store_true")
    # Model
    s.add_argument("--trust-remote-code", action="store_true")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--max-model-len", type=_human_int, default=None)
    s.add_argument("--quantization", "-q", default=None)
    s.add_argument("--enforce-eager", action="store_true")
    s.add_argument("--dtype", default="auto")
    # Cache
    s.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    s.add_argument("--block-size", type=int, default=None)
    s.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    # Parallel
    s.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    s.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    s.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    s.add_argument("--data-parallel-rank", "-dpn", type=int, default=None)
    s.add_argument("--data-parallel-size-local", "-dpl", type=int, default=None)
    s.add_argument("--data-parallel-address", "-dpa", default=None)
    s.add_argument("--data-parallel-rpc-port", "-dpp", type=_port, default=None)
    s.add_argument("--enable-expert-parallel", "-ep", action="store_true")
    # Scheduler
    s.add_argument("--max-num-batched-tokens", type=_human_int, default=None)
    s.add_argument("--max-num-seqs", type=int, default=None)
    s.add_argument("--async-scheduling", action="store_true")
    # JSON configs
    s.add_argument("--speculative-config", type=_json_object("--speculative-config"), default=None)
    s.add_argument("--compilation-config", "-O", type=_json_object("--compilation-config", allow_int=True),
                   default=None)
    s.add_argument("--additional-config", type=_json_object("--additional-config"), default=None)
    s.add_argument("--kv-transfer-config", type=_kv_transfer_config, default=None)
    return parser, s


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, serve_parser = build_parser()
    if not argv:
        parser.print_usage(sys.stderr)
        parser.exit(2, "vllm: error: the following arguments are required: subcommand\n")
    args = parser.parse_args(argv)
    if args.subcommand != "serve":
        parser.print_usage(sys.stderr)
        parser.exit(2, "vllm: error: the following arguments are required: subcommand\n")
    if args.model_tag and args.model and args.model_tag != args.model:
        serve_parser.error("model_tag and --model disagree")
    args.model = args.model_tag or args.model
    if not args.model:
        serve_parser.error("the following arguments are required: model_tag")
    if args.tensor_parallel_size < 1 or args.data_parallel_size < 1:
        serve_parser.error("parallel sizes must be >= 1")
    from vllm_sim.serve import run
    return run(args, argv)
