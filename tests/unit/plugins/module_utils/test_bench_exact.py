# -*- coding: utf-8 -*-
"""plugins/module_utils/_bench.py, pinned exactly: the sum of a metric's samples (which lines count), the whole
messages of the errors, the hit rate between snapshots, numpy's percentile, one arm's whole record and the whole
markdown summary."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _bench as B


def test_the_metric_names():
    assert B.HITS == "vllm:external_prefix_cache_hits_total"
    assert B.QUERIES == "vllm:external_prefix_cache_queries_total"


@pytest.mark.parametrize("text, want", [
    ("m 1\n", 1.0),
    ("m{a=\"1\"} 2.5\nm{a=\"2\"}\t3 1700000000\n", 5.5),
    ("m 1e3\nm_total 7\nmm 7\n# m 9\n m 9\nx{m=\"1\"} 9\n", 1009.0),  # a line's leading blanks are no part of it
    ("m 0\n", 0.0),
    ("m +Inf\n", float("inf")),
    ("other 1\n", None),
    ("", None),
    ("a:b_c 4\n_m 5\n", None),
    # label values holding "}", escaped quotes, backslashes and newlines (the regex before this parser lost them)
    ('m{path="/x}y"} 2\nm{msg="say \\"hi\\"",other="{}"} 4\nm{a="back\\\\"} 8\nm{a="line\\nbreak"} 16\n', 30.0),
    ('m{a="\\"}"} 1\nm{a="}",b="\\\\"} 2\n', 3.0),
])
def test_prom_sum(text, want):
    assert B.prom_sum(text, "m") == want


def test_prom_sum_reads_names_with_colons_and_underscores():
    assert B.prom_sum("a:b_c9 4\na:b_c9{x=\"{\"} 1\n", "a:b_c9") == 5.0
    assert B.prom_sum("_m:x 2\n", "_m:x") == 2.0


@pytest.mark.parametrize("text, reason", [
    ("m 1\nm{a=\"1\"} abc\n", "could not convert string to float: 'abc'"),
    ("m 1_0\n", "Invalid value: '1_0'"),
    ("m\n", "invalid metric name:m"),
])
def test_prom_sum_refuses_text_that_is_no_exposition(text, reason):
    with pytest.raises(B.BenchError) as err:
        B.prom_sum(text, "m")
    assert str(err.value) == "not Prometheus text (%s)" % reason


def test_prom_sums_of_every_sample_name():
    assert B.prom_sums("# TYPE m_total counter\nm_total{a=\"x\"} 1\nm_total 2\nm_created 5\nother 1\n") == {
        "m_total": 3.0, "m_created": 5.0, "other": 1.0}
    assert B.prom_sums("") == {}


def test_prom_sum_says_what_to_install_without_prometheus_client(monkeypatch):
    monkeypatch.setattr(B, "text_string_to_metric_families", None)
    with pytest.raises(B.BenchError) as err:
        B.prom_sum("m 1\n", "m")
    assert str(err.value) == ("reading /metrics needs prometheus_client in this Python (aiperf depends on it): "
                              "pip install prometheus_client")


def test_pool_counters_name_the_engine_whose_text_is_no_exposition():
    with pytest.raises(B.BenchError) as err:
        B.pool_counters({"http://e:1/metrics": "vllm:external_prefix_cache_hits_total{a=\"1\" 1\n"})
    assert str(err.value).startswith("http://e:1/metrics: not Prometheus text (")


@pytest.mark.parametrize("text", [
    "vllm:external_prefix_cache_hits_total 1\n",
    "vllm:external_prefix_cache_queries_total 1\n",
    "",
])
def test_pool_counters_need_both_counters(text):
    with pytest.raises(B.BenchError) as err:
        B.pool_counters({"http://e:1/metrics": text})
    assert str(err.value) == ("http://e:1/metrics has no vllm:external_prefix_cache_hits_total / "
                              "vllm:external_prefix_cache_queries_total: not a vLLM engine with a KV connector?")


def test_pool_counters_of_each_engine():
    texts = {"a": "vllm:external_prefix_cache_hits_total 0\nvllm:external_prefix_cache_queries_total 0\n",
             "b": "vllm:external_prefix_cache_hits_total{e=\"0\"} 3\nvllm:external_prefix_cache_queries_total 9\n"}
    assert B.pool_counters(texts) == {"a": {"hits": 0.0, "queries": 0.0}, "b": {"hits": 3.0, "queries": 9.0}}
    assert B.pool_counters({}) == {}


@pytest.mark.parametrize("before, after, want", [
    ({"a": {"hits": 1, "queries": 2}}, {"a": {"hits": 4, "queries": 10}}, {"hits": 3.0, "queries": 8.0, "rate": 0.375}),
    ({"a": {"hits": 1, "queries": 2}, "gone": {"hits": 9, "queries": 9}}, {"a": {"hits": 1, "queries": 2}},
     {"hits": 0.0, "queries": 0.0, "rate": None}),
    ({"a": {"hits": 0, "queries": 0}, "b": {"hits": 0, "queries": 0}},
     {"a": {"hits": 0, "queries": 4}, "b": {"hits": 1, "queries": 4}}, {"hits": 1.0, "queries": 8.0, "rate": 0.125}),
    ({}, {}, {"hits": 0.0, "queries": 0.0, "rate": None}),
])
def test_hit_rate(before, after, want):
    assert B.hit_rate(before, after) == want


@pytest.mark.parametrize("now, message", [
    ({"hits": 0, "queries": 20}, "the counters of e went down (the engine restarted during the run)"),
    ({"hits": 20, "queries": 0}, "the counters of e went down (the engine restarted during the run)"),
])
def test_hit_rate_refuses_a_counter_that_went_down(now, message):
    with pytest.raises(B.BenchError) as err:
        B.hit_rate({"e": {"hits": 5, "queries": 10}}, {"e": now})
    assert str(err.value) == message


def test_hit_rate_needs_a_before_snapshot_of_each_engine():
    with pytest.raises(B.BenchError) as err:
        B.hit_rate({"a": {"hits": 0, "queries": 0}}, {"a": {"hits": 0, "queries": 0}, "b": {"hits": 0, "queries": 0}})
    assert str(err.value) == "no 'before' snapshot of b"


@pytest.mark.parametrize("values, pct, want", [
    ([5, 1, 4, 2, 3], 0, 1),
    ([5, 1, 4, 2, 3], 100, 5),
    ([5, 1, 4, 2, 3], 25, 2),
    ([5, 1, 4, 2, 3], 30, 2.2),
    ([10, 20], 50, 15),
    ([10, 20], 75, 17.5),
    ([0, 10, 40], 75, 25),
    ([7], 50, 7),
])
def test_percentile_interpolates_like_numpy(values, pct, want):
    assert B.percentile(values, pct) == pytest.approx(want, abs=1e-12)


def test_percentile_of_nothing():
    with pytest.raises(B.BenchError) as err:
        B.percentile([], 50)
    assert str(err.value) == "no values"


SUMMARY = {"time_to_first_token": {"avg": 150.0, "p50": 140.0, "p90": 200.0, "p99": 300.0, "p1": 1.0},
           "inter_token_latency": {"avg": 1.0, "p50": 0.9, "p90": 1.5, "p99": 2.0},
           "output_token_throughput": {"avg": 400.0}, "request_throughput": {"avg": 6.5},
           "benchmark_duration": {"avg": 7.0}}


def test_run_record_is_whole():
    records = [{"metrics": {"time_to_first_token": {"value": 100.0}}},
               {"metrics": {"time_to_first_token": {"value": 180.0}}, "error": None},
               {"metrics": {"other": {"value": 1}}},
               {"metrics": None},
               {"metrics": {"time_to_first_token": {"value": 5.0}}, "error": {"code": 503}}]
    assert B.run_record("A", 1, SUMMARY, records, {"hits": 400.0, "queries": 2000.0, "rate": 0.2}) == {
        "label": "A", "kv_pool_enabled": True, "requests_ok": 4, "requests_failed": 1,
        "ttft_ms": {"avg": 150.0, "p50": 140.0, "p90": 200.0, "p99": 300.0},
        "itl_ms": {"avg": 1.0, "p50": 0.9, "p90": 1.5, "p99": 2.0},
        "output_tokens_per_s": 400.0, "requests_per_s": 6.5, "duration_s": 7.0,
        "external_hit_rate": 0.2, "external_hits_tokens": 400.0, "external_queries_tokens": 2000.0,
        "ttft_ms_per_request": [100.0, 180.0]}


def test_run_record_of_an_empty_summary():
    empty = {"time_to_first_token": None, "output_token_throughput": None, "request_throughput": None,
             "benchmark_duration": None}
    for summary in ({}, empty):
        assert B.run_record("B", 0, summary, [], {"hits": 0.0, "queries": 0.0, "rate": None}) == {
            "label": "B", "kv_pool_enabled": False, "requests_ok": 0, "requests_failed": 0,
            "ttft_ms": {"avg": None, "p50": None, "p90": None, "p99": None},
            "itl_ms": {"avg": None, "p50": None, "p90": None, "p99": None},
            "output_tokens_per_s": None, "requests_per_s": None, "duration_s": None,
            "external_hit_rate": None, "external_hits_tokens": 0.0, "external_queries_tokens": 0.0,
            "ttft_ms_per_request": []}


def _run(label, pool, ttft, itl, tok, req, rate, ok=10, failed=0):
    return {"label": label, "kv_pool_enabled": pool, "requests_ok": ok, "requests_failed": failed,
            "ttft_ms": dict(zip(("p50", "p90", "p99"), ttft)), "itl_ms": dict(zip(("p50", "p90", "p99"), itl)),
            "output_tokens_per_s": tok, "requests_per_s": req, "external_hit_rate": rate}


HEADER = ("| arm | KV pool | ok | failed | TTFT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) | output tok/s "
          "| req/s | external hit rate |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")


def test_markdown_of_two_arms_is_whole():
    a = _run("pool", True, (70.04, 90.06, 120.0), (0.904, 1.5, 2.0), 400.25, 6.555, 0.1234, ok=9, failed=1)
    b = _run("no pool", False, (140.0, 200.0, 300.0), (1.0, 1.25, 3.0), 300.0, 5.0, None)
    assert B.markdown([a, b]) == (
        "# KV pool A/B\n\n" + HEADER +
        "| pool | on | 9 | 1 | 70.0 / 90.1 / 120.0 | 0.90 / 1.50 / 2.00 | 400.2 | 6.55 | 12.3 % |\n"
        "| no pool | off | 10 | 0 | 140.0 / 200.0 / 300.0 | 1.00 / 1.25 / 3.00 | 300.0 | 5.00 | - |\n"
        "\nTTFT p50 pool / no pool = 0.50; external hit rate 12.3 % vs -.\n")
    assert B.markdown([b, a], title="T").startswith("# T\n\n")
    assert B.markdown([b, a], title="T").endswith("\nTTFT p50 no pool / pool = 2.00; external hit rate - vs 12.3 %.\n")


def test_markdown_writes_what_is_not_finite_in_lower_case():
    inf, nan = float("inf"), float("nan")
    a = _run("a", True, (inf, inf, nan), (inf, nan, inf), inf, nan, inf, ok=1)
    b = _run("b", False, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), 1.0, 1.0, nan)
    assert B.markdown([a, b]) == (
        "# KV pool A/B\n\n" + HEADER +
        "| a | on | 1 | 0 | inf / inf / nan | inf / nan / inf | inf | nan | inf % |\n"
        "| b | off | 10 | 0 | 1.0 / 1.0 / 1.0 | 1.00 / 1.00 / 1.00 | 1.0 | 1.00 | nan % |\n"
        "\nTTFT p50 a / b = inf; external hit rate inf % vs nan %.\n")


def test_markdown_of_one_arm_has_no_comparison():
    b = _run("b", False, (100.0, 1.0, 1.0), (1.0, 1.0, 1.0), 1.0, 1.0, 1.0)
    assert B.markdown([b]) == ("# KV pool A/B\n\n" + HEADER +
                               "| b | off | 10 | 0 | 100.0 / 1.0 / 1.0 | 1.00 / 1.00 / 1.00 | 1.0 | 1.00 | 100.0 % |\n")


def test_markdown_without_a_comparison():
    a = _run("a", True, (None, None, None), (None, None, None), None, None, 0.0, ok=0, failed=3)
    b = _run("b", False, (100.0, 1.0, 1.0), (1.0, 1.0, 1.0), 1.0, 1.0, 1.0)
    assert B.markdown([a]) == ("# KV pool A/B\n\n" + HEADER +
                               "| a | on | 0 | 3 | - / - / - | - / - / - | - | - | 0.0 % |\n")
    assert not B.markdown([a, b]).endswith("%.\n")  # no TTFT p50 of the first arm
    assert not B.markdown([b, a]).endswith("%.\n")  # nor of the second
    assert B.markdown([b, dict(b, label="c")]).endswith("\nTTFT p50 b / c = 1.00; external hit rate 100.0 % vs 100.0 %.\n")
    assert B.markdown([]) == "# KV pool A/B\n\n" + HEADER
