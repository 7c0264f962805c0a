# -*- coding: utf-8 -*-
"""The Grafana dashboard of the role monitoring, checked without a Grafana: prefill and decode are shown apart
for every engine panel, every panel query is valid PromQL (promtool parses each one as a recording rule), and
every metric it reads is one the engines (vLLM 0.18), the proxy wrapper or Prometheus itself exports."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "roles/monitoring/files/ascend-vllm-pd-dashboard.json"
GOLDEN_DIR = ROOT / "tests/golden/a3/p0/etc/prometheus/file_sd/ascend-vllm-pd/grafana"
# What the dashboard may read. vLLM 0.18 (vllm/v1/metrics/loggers.py, PrometheusStatLogger), histograms with
# their _bucket series; a3_proxy.py's /metrics; Prometheus' own up; the process collector's start time.
VLLM = {"vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
        "vllm:external_prefix_cache_hits_total", "vllm:external_prefix_cache_queries_total"}
PROXY = {"a3_proxy_requests_total", "a3_proxy_upstream_errors_total", "a3_proxy_no_backend_total",
         "a3_proxy_first_byte_timeouts_total", "a3_proxy_backend_up"}
OTHER = {"up", "process_start_time_seconds"}
ENGINE_PANELS = ("time to first token", "inter-token latency", "end-to-end request latency", "throughput",
                 "running and waiting requests", "KV cache usage", "prefix cache hit rate", "engine restarts")
FUNCTIONS = {"histogram_quantile", "sum", "by", "rate", "max", "changes", "le", "label_values"}


def panels():
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def exprs():
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def test_prefill_and_decode_each_have_every_engine_panel():
    titles = [p["title"] for p in panels()]
    for side in ("prefill", "decode"):
        for what in ENGINE_PANELS:
            found = [t for t in titles if t.startswith(side + ":") and what in t]
            assert len(found) == 1, "%s: no single panel for %r in %s" % (side, what, titles)
    for title, expr in exprs():
        side = title.split(":", 1)[0]
        if side in ("prefill", "decode"):
            assert 'side="%s"' % side in expr, (title, expr)


def test_proxy_errors_and_backends_are_shown():
    titles = [p["title"] for p in panels()]
    assert any("proxy: requests and errors" in t for t in titles) and any("backends in rotation" in t for t in titles)


def test_every_query_reads_only_exported_metrics():
    known = VLLM | PROXY | OTHER
    for title, expr in exprs():
        text = re.sub(r'\{[^}]*\}', '', re.sub(r'"[^"]*"', '""', expr))   # drop label matchers and strings
        text = re.sub(r'\[[^\]]*\]', '', text)
        names = set(re.findall(r'[a-zA-Z_:][a-zA-Z0-9_:]*', text)) - FUNCTIONS
        names = {n for n in names if not re.fullmatch(r'[0-9.]+', n)}
        unknown = names - known - {"host", "dp_rank", "code", "role"}
        assert not unknown, "%s reads %s, which nothing exports" % (title, sorted(unknown))


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (Debian/Ubuntu), then rerun"
    return path


def test_every_query_is_valid_promql(promtool, tmp_path):
    # Grafana's $__rate_interval and $cluster are filled in by Grafana: give them values Prometheus parses.
    rules = [{"record": "dashboard:query_%d" % i,
              "expr": expr.replace("$__rate_interval", "5m").replace("$cluster", ".*")}
             for i, (_title, expr) in enumerate(exprs())]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", "queries.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: %d rules found" % len(rules) in proc.stdout + proc.stderr


def test_render_writes_the_provisioning_next_to_the_dashboard():
    # (the dashboard itself is a verbatim copy: tests/golden/test_golden.py checks the render carries it)
    provisioning = yaml.safe_load((GOLDEN_DIR / "grafana-dashboards.yml").read_text())
    assert provisioning["providers"][0]["options"]["path"] == "/etc/prometheus/file_sd/ascend-vllm-pd/grafana"
