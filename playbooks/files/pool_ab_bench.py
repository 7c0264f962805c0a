# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Client driver and report of the KV pool A/B (playbooks/benchmark.yml runs it on the controller, in the
benchmark venv that holds the client, aiperf, and matplotlib).

  pool_ab_bench.py tokenizer DIR
      writes a byte-level tokenizer (one token per UTF-8 byte, i.e. character counts for ASCII text) in
      Hugging Face format: aiperf sizes its synthetic prompts with it, offline, without any hub download.
  pool_ab_bench.py run --label A --pool on --url PROXY --metrics URL [--metrics URL ...] --out DIR \
                       --tokenizer DIR --model NAME [--api-key-file FILE] [client knobs]
      snapshots the engines' external prefix-cache counters, runs `aiperf profile` against the proxy with a
      shared-prefix workload (aiperf's progress display on the terminal), snapshots again and writes
      DIR/<label>.json (TTFT / ITL p50/p90/p99, throughput, requests ok/failed, external hit rate).
      --api-key-file (default: $POOL_AB_API_KEY_FILE): the proxy's client key, which aiperf then sends as
      "Authorization: Bearer <key>"; it is handed to aiperf's command line in memory (aiperf's CLI run with
      `python -c`, its arguments read from stdin), so no process shows it in its argv and the printed command
      leaves it out (aiperf redacts it in its own exports).
  pool_ab_bench.py report --out DIR A.json B.json
      writes DIR/summary.json, DIR/summary.md and DIR/pool_ab.png (TTFT distribution and hit rate, A vs B).

The pure parts live in plugins/module_utils/_bench.py (tested in tests/unit); this file is found through the
collection (ansible_collections on sys.path) or beside a checkout.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _import_bench():
    try:
        from ansible_collections.ascend.vllm_pd.plugins.module_utils import _bench  # noqa: PLC0415
        return _bench
    except ImportError:
        import importlib.util  # noqa: PLC0415
        path = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_bench.py"
        spec = importlib.util.spec_from_file_location("_bench", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


B = _import_bench()
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url, timeout=10.0):
    with _OPENER.open(url, timeout=timeout) as resp:
        return resp.read().decode("utf-8", "replace")


def snapshot(urls):
    return B.pool_counters({u: _get(u) for u in urls})


# Runs aiperf's CLI (the console script `aiperf` is aiperf.cli:app) with the argv it reads from stdin as one JSON line.
_LAUNCH = ("import json, sys\n"
           "sys.argv = json.loads(sys.stdin.readline())\n"
           "from aiperf.cli import app\n"
           "sys.exit(app())\n")


def read_key(path):
    """The key in path (stripped), "" without a path; a path without a key is an error."""
    if not path:
        return ""
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SystemExit("cannot read the proxy's client key from %s: %s" % (path, exc.strerror or exc))
    if not key:
        raise SystemExit("%s holds no key" % path)
    return key


def client_command(argv, key, python=sys.executable):
    """(command, stdin bytes or None) that runs aiperf with argv, plus --api-key when there is a key: then the
    command is a Python that reads the whole argv from stdin, so the key is in no process's argv."""
    if not key:
        return list(argv), None
    return [python, "-c", _LAUNCH], (json.dumps(list(argv) + ["--api-key", key]) + "\n").encode()


def run_client(argv, key, env, cwd):
    cmd, stdin = client_command(argv, key)
    if stdin is None:
        return subprocess.call(cmd, env=env, cwd=cwd)
    with subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE) as proc:
        proc.stdin.write(stdin)
        proc.stdin.close()
        return proc.wait()


def cmd_tokenizer(args):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: PLC0415
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 10000000}))
    print("byte-level tokenizer in %s" % out)


def cmd_run(args):
    out = Path(args.out).resolve()
    args.tokenizer = str(Path(args.tokenizer).resolve())  # aiperf runs in its artifact directory
    api_key = read_key(args.api_key_file)
    art = out / ("aiperf-" + args.label)
    art.mkdir(parents=True, exist_ok=True)
    before = snapshot(args.metrics)
    aiperf = Path(sys.executable).parent / "aiperf"
    argv = [str(aiperf), "profile", "--model", args.model, "--url", args.url, "--endpoint-type", "completions",
            "--streaming", "--tokenizer", args.tokenizer,
            "--prompt-input-tokens-mean", str(args.input_chars), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(args.output_tokens), "--prompt-output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--extra-inputs", "min_tokens:%d" % args.output_tokens,
            "--prompt-prefix-pool-size", str(args.prefixes), "--prompt-prefix-length", str(args.prefix_chars),
            "--request-count", str(args.requests), "--concurrency", str(args.concurrency),
            "--random-seed", str(args.seed), "--ui", args.ui, "--output-artifact-dir", str(art),
            "--export-level", "records", "--no-auto-plot"]
    env = dict(os.environ)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # aiperf 0.13 then looks a local path up in the hub cache
        env.pop(key, None)
    env["NO_PROXY"] = env["no_proxy"] = ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.0/8", "localhost"]))
    env.pop("POOL_AB_API_KEY_FILE", None)
    shown = argv + (["--api-key", "<the key in %s>" % args.api_key_file] if api_key else [])
    print("arm %s (KV pool %s): %s" % (args.label, args.pool, " ".join(shown)), flush=True)
    started = time.time()
    rc = run_client(argv, api_key, env, str(art))
    if rc != 0:
        raise SystemExit("aiperf exited %d; its log: %s" % (rc, art / "logs" / "aiperf.log"))
    after = snapshot(args.metrics)
    summary = json.loads((art / "profile_export_aiperf.json").read_text())
    records = [json.loads(line) for line in (art / "profile_export.jsonl").read_text().splitlines() if line.strip()]
    rec = B.run_record(args.label, args.pool == "on", summary, records, B.hit_rate(before, after))
    rec.update({"proxy": args.url, "engines": args.metrics, "started": started, "client": "aiperf",
                "workload": {"requests": args.requests, "concurrency": args.concurrency, "prefixes": args.prefixes,
                             "prefix_chars": args.prefix_chars, "input_chars": args.input_chars,
                             "output_tokens": args.output_tokens, "seed": args.seed}})
    path = out / ("%s.json" % args.label)
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print("arm %s: %d ok, %d failed, TTFT p50 %.1f ms, external hit rate %s -> %s" % (
        args.label, rec["requests_ok"], rec["requests_failed"], rec["ttft_ms"]["p50"] or -1,
        "-" if rec["external_hit_rate"] is None else "%.1f %%" % (100 * rec["external_hit_rate"]), path))


def plot(runs, path):
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    for r in runs:
        values = sorted(r["ttft_ms_per_request"])
        if values:
            ax1.plot(values, [(i + 1) / len(values) for i in range(len(values))], drawstyle="steps-post",
                     label="%s (pool %s)" % (r["label"], "on" if r["kv_pool_enabled"] else "off"))
    ax1.set_xlabel("TTFT (ms)")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("TTFT distribution (CDF)")
    ax1.grid(alpha=0.3)
    ax1.legend()
    labels = [r["label"] for r in runs]
    rates = [100 * (r["external_hit_rate"] or 0) for r in runs]
    bars = ax2.bar(labels, rates, color=["tab:blue", "tab:orange", "tab:green", "tab:red"][:len(runs)])
    for rect, rate in zip(bars, rates):
        ax2.text(rect.get_x() + rect.get_width() / 2, rate, "%.1f %%" % rate, ha="center", va="bottom")
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("external prefix-cache hit rate (%)")
    ax2.set_title("KV pool hit rate (prefill)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def cmd_report(args):
    out = Path(args.out)
    runs = [json.loads(Path(p).read_text()) for p in args.runs]
    (out / "summary.json").write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    (out / "summary.md").write_text(B.markdown(runs))
    plot(runs, out / "pool_ab.png")
    print(B.markdown(runs))
    print("written: %s, %s, %s" % (out / "summary.json", out / "summary.md", out / "pool_ab.png"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer")
    t.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("--label", required=True)
    r.add_argument("--pool", choices=("on", "off"), required=True)
    r.add_argument("--url", required=True)
    r.add_argument("--metrics", action="append", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--tokenizer", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--requests", type=int, default=64)
    r.add_argument("--concurrency", type=int, default=4)
    r.add_argument("--prefixes", type=int, default=8)
    r.add_argument("--prefix-chars", type=int, default=4000)
    r.add_argument("--input-chars", type=int, default=600)
    r.add_argument("--output-tokens", type=int, default=16)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--ui", default="simple", choices=("simple", "dashboard", "none"))
    r.add_argument("--api-key-file", default=os.environ.get("POOL_AB_API_KEY_FILE", ""),
                   help="file holding the proxy's client key (default: $POOL_AB_API_KEY_FILE)")
    p = sub.add_parser("report")
    p.add_argument("--out", required=True)
    p.add_argument("runs", nargs="+")
    args = ap.parse_args(argv)
    {"tokenizer": cmd_tokenizer, "run": cmd_run, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
