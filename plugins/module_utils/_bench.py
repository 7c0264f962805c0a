# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure functions of the KV pool A/B benchmark (playbooks/benchmark.yml, playbooks/files/pool_ab_bench.py):
Prometheus counter deltas, the external prefix-cache hit rate, one run's record from the client's output,
and the markdown summary."""
from __future__ import annotations

import math

# The engines' /metrics text is read with prometheus_client's own parser (the one parser of the benchmarks and the
# tests). No module imports this file: only pool_ab_bench.py does, on the controller, in the benchmark venv, where
# the client aiperf depends on prometheus_client.
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # checked where it is needed, with a message that says what to install
    text_string_to_metric_families = None

HITS = "vllm:external_prefix_cache_hits_total"
QUERIES = "vllm:external_prefix_cache_queries_total"


class BenchError(ValueError):
    pass


def prom_sums(text: str) -> dict:
    """{sample name: the sum of its samples over all label sets} of a Prometheus text exposition (a counter's
    samples are named as in the text: vLLM's HELP and TYPE lines carry the _total). Text the parser refuses raises
    BenchError naming the parser's reason."""
    if text_string_to_metric_families is None:
        raise BenchError("reading /metrics needs prometheus_client in this Python (aiperf depends on it): "
                         "pip install prometheus_client")
    sums = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    except ValueError as e:
        raise BenchError("not Prometheus text (%s)" % e)
    return sums


def prom_sum(text: str, name: str):
    """Sum of every sample of metric `name` (all label sets) in Prometheus text; None when it is absent."""
    return prom_sums(text).get(name)


def pool_counters(texts: dict) -> dict:
    """{url: {"hits": h, "queries": q}} from {url: /metrics text}; an engine without the counters is an error
    (a wrong URL would otherwise read as a 0 % hit rate), and so is text that is no Prometheus exposition."""
    out = {}
    for url, text in texts.items():
        try:
            sums = prom_sums(text)
        except BenchError as e:
            raise BenchError("%s: %s" % (url, e))
        hits, queries = sums.get(HITS), sums.get(QUERIES)
        if hits is None or queries is None:
            raise BenchError("%s has no %s / %s: not a vLLM engine with a KV connector?" % (url, HITS, QUERIES))
        out[url] = {"hits": hits, "queries": queries}
    return out


def hit_rate(before: dict, after: dict) -> dict:
    """External prefix-cache hits and queries between two pool_counters() snapshots, summed over the engines,
    and their ratio (None when nothing was queried). A counter that went down means an engine restarted in
    between: its delta would be wrong, so that is an error."""
    hits = queries = 0.0
    for url, now in after.items():
        then = before.get(url)
        if then is None:
            raise BenchError("no 'before' snapshot of %s" % url)
        d_hits, d_queries = now["hits"] - then["hits"], now["queries"] - then["queries"]
        if d_hits < 0 or d_queries < 0:
            raise BenchError("the counters of %s went down (the engine restarted during the run)" % url)
        hits += d_hits
        queries += d_queries
    return {"hits": hits, "queries": queries, "rate": (hits / queries) if queries else None}


def percentile(values, pct):
    """Linear-interpolated percentile (numpy's default) of a non-empty list."""
    if not values:
        raise BenchError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _stat(aiperf: dict, key: str) -> dict:
    block = aiperf.get(key) or {}
    return {p: block.get(p) for p in ("avg", "p50", "p90", "p99")}


def run_record(label: str, pool_enabled: bool, aiperf: dict, records: list, hits: dict) -> dict:
    """One arm's result: TTFT / ITL (ms) from the client's summary, throughput, requests ok/failed (from the
    per-request records), the per-request TTFTs (for the plot) and the external hit rate."""
    ok = [r for r in records if not r.get("error")]
    ttfts = [r["metrics"]["time_to_first_token"]["value"] for r in ok
             if "time_to_first_token" in (r.get("metrics") or {})]
    return {
        "label": label,
        "kv_pool_enabled": bool(pool_enabled),
        "requests_ok": len(ok),
        "requests_failed": len(records) - len(ok),
        "ttft_ms": _stat(aiperf, "time_to_first_token"),
        "itl_ms": _stat(aiperf, "inter_token_latency"),
        "output_tokens_per_s": (aiperf.get("output_token_throughput") or {}).get("avg"),
        "requests_per_s": (aiperf.get("request_throughput") or {}).get("avg"),
        "duration_s": (aiperf.get("benchmark_duration") or {}).get("avg"),
        "external_hit_rate": hits["rate"],
        "external_hits_tokens": hits["hits"],
        "external_queries_tokens": hits["queries"],
        "ttft_ms_per_request": ttfts,
    }


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def markdown(runs: list, title: str = "KV pool A/B") -> str:
    """The summary table of the arms, then one line comparing the first two (TTFT p50 and hit rate)."""
    lines = ["# %s" % title, "",
             "| arm | KV pool | ok | failed | TTFT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) | output tok/s "
             "| req/s | external hit rate |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        t, i = r["ttft_ms"], r["itl_ms"]
        lines.append("| %s | %s | %d | %d | %s / %s / %s | %s / %s / %s | %s | %s | %s |" % (
            r["label"], "on" if r["kv_pool_enabled"] else "off", r["requests_ok"], r["requests_failed"],
            _fmt(t["p50"]), _fmt(t["p90"]), _fmt(t["p99"]), _fmt(i["p50"], "%.2f"), _fmt(i["p90"], "%.2f"),
            _fmt(i["p99"], "%.2f"), _fmt(r["output_tokens_per_s"]), _fmt(r["requests_per_s"], "%.2f"),
            "-" if r["external_hit_rate"] is None else "%.1f %%" % (100 * r["external_hit_rate"])))
    if len(runs) >= 2 and runs[0]["ttft_ms"]["p50"] and runs[1]["ttft_ms"]["p50"]:
        a, b = runs[0], runs[1]
        lines += ["", "TTFT p50 %s / %s = %.2f; external hit rate %s vs %s." % (
            a["label"], b["label"], a["ttft_ms"]["p50"] / b["ttft_ms"]["p50"],
            "-" if a["external_hit_rate"] is None else "%.1f %%" % (100 * a["external_hit_rate"]),
            "-" if b["external_hit_rate"] is None else "%.1f %%" % (100 * b["external_hit_rate"]))]
    return "\n".join(lines) + "\n"
