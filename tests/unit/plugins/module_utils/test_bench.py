# -*- coding: utf-8 -*-
"""plugins/module_utils/_bench.py: counters, hit rate, per-arm record and summary of the KV pool A/B."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _bench as B

METRICS = """# HELP vllm:external_prefix_cache_hits External prefix cache hits
# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="glm-5.1"} 1024.0
vllm:external_prefix_cache_hits_total{engine="1",model_name="glm-5.1"} 76.0
vllm:external_prefix_cache_queries_total{engine="0",model_name="glm-5.1"} 17163.0
vllm:external_prefix_cache_queries_total{engine="1",model_name="glm-5.1"} 837
vllm:external_prefix_cache_hits_created{engine="0"} 1.7e9
"""


def test_prom_sum_adds_label_sets_and_ignores_other_metrics():
    assert B.prom_sum(METRICS, B.HITS) == 1100.0
    assert B.prom_sum(METRICS, B.QUERIES) == 18000.0
    assert B.prom_sum(METRICS, "vllm:missing_total") is None
    with pytest.raises(B.BenchError, match="not Prometheus text"):
        B.prom_sum("vllm:x_total{a=\"1\"} abc\n", "vllm:x_total")


def test_pool_counters_refuse_an_engine_without_the_counters():
    assert B.pool_counters({"u": METRICS}) == {"u": {"hits": 1100.0, "queries": 18000.0}}
    with pytest.raises(B.BenchError, match="u2 has no vllm:external_prefix_cache_hits_total"):
        B.pool_counters({"u": METRICS, "u2": "vllm:other 1\n"})


def test_hit_rate_is_the_delta_summed_over_engines():
    before = {"a": {"hits": 100, "queries": 1000}, "b": {"hits": 0, "queries": 0}}
    after = {"a": {"hits": 400, "queries": 2000}, "b": {"hits": 100, "queries": 1000}}
    assert B.hit_rate(before, after) == {"hits": 400, "queries": 2000, "rate": 0.2}
    assert B.hit_rate(after, after)["rate"] is None
    restarted = {"a": {"hits": 0, "queries": 10}, "b": after["b"]}  # engine a restarted: its counters went down
    with pytest.raises(B.BenchError, match="counters of a went down"):
        B.hit_rate(after, restarted)
    with pytest.raises(B.BenchError, match="no 'before' snapshot of b"):
        B.hit_rate({"a": before["a"]}, after)


def test_percentile_interpolates_like_numpy():
    assert B.percentile([1, 2, 3, 4], 50) == 2.5
    assert B.percentile([10], 99) == 10
    assert B.percentile([0, 10], 90) == 9
    with pytest.raises(B.BenchError):
        B.percentile([], 50)


def _rec(ttft, error=None):
    rec = {"metadata": {}, "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"}}}
    if error:
        rec = {"metadata": {}, "metrics": {}, "error": {"code": 503, "message": error}}
    return rec


SUMMARY = {"time_to_first_token": {"unit": "ms", "avg": 150.0, "p50": 140.0, "p90": 200.0, "p99": 300.0, "p1": 1},
           "inter_token_latency": {"unit": "ms", "avg": 1.0, "p50": 0.9, "p90": 1.5, "p99": 2.0},
           "output_token_throughput": {"avg": 400.0}, "request_throughput": {"avg": 6.5},
           "benchmark_duration": {"avg": 7.0}}


def test_run_record_counts_failures_and_keeps_ok_ttfts():
    rec = B.run_record("A", True, SUMMARY, [_rec(100.0), _rec(180.0), _rec(0, error="no backend")],
                       {"hits": 400.0, "queries": 2000.0, "rate": 0.2})
    assert rec["requests_ok"] == 2 and rec["requests_failed"] == 1
    assert rec["ttft_ms_per_request"] == [100.0, 180.0]
    assert rec["ttft_ms"] == {"avg": 150.0, "p50": 140.0, "p90": 200.0, "p99": 300.0}
    assert rec["itl_ms"]["p99"] == 2.0 and rec["output_tokens_per_s"] == 400.0 and rec["requests_per_s"] == 6.5
    assert rec["kv_pool_enabled"] is True and rec["external_hit_rate"] == 0.2


def test_markdown_table_and_comparison():
    a = B.run_record("A", True, SUMMARY, [_rec(100.0)], {"hits": 1, "queries": 5, "rate": 0.2})
    slow = dict(SUMMARY, time_to_first_token=dict(SUMMARY["time_to_first_token"], p50=280.0))
    b = B.run_record("B", False, slow, [_rec(300.0), _rec(0, error="x")], {"hits": 0, "queries": 5, "rate": 0.0})
    text = B.markdown([a, b])
    assert "| A | on | 1 | 0 | 140.0 / 200.0 / 300.0 | 0.90 / 1.50 / 2.00 | 400.0 | 6.50 | 20.0 % |" in text
    assert "| B | off | 1 | 1 | 280.0 / 200.0 / 300.0 |" in text and "| 0.0 % |" in text
    assert "TTFT p50 A / B = 0.50; external hit rate 20.0 % vs 0.0 %." in text
    none = B.run_record("C", False, {}, [], {"hits": 0, "queries": 0, "rate": None})
    assert "| C | off | 0 | 0 | - / - / - | - / - / - | - | - | - |" in B.markdown([none])
