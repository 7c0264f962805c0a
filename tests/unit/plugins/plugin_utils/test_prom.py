# -*- coding: utf-8 -*-
"""plugins/plugin_utils/_prom.py: sum a metric of a Prometheus text exposition over its label sets."""
from __future__ import annotations

import math

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._prom import prom_sum

HITS = "vllm:external_prefix_cache_hits_total"

# The shape vLLM's /metrics has: HELP/TYPE comments, one sample per engine/model label set, _created samples.
METRICS = """\
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits, in tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="glm-5.1"} 128.0
vllm:external_prefix_cache_hits_total{engine="1",model_name="glm-5.1"} 64.0
vllm:external_prefix_cache_hits_created{engine="0",model_name="glm-5.1"} 1.7645e+09
# HELP vllm:external_prefix_cache_queries_total External prefix cache queries, in tokens.
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="glm-5.1"} 512.0
vllm:external_prefix_cache_hits_total_other 1000
"""


def test_sums_every_label_set_of_exactly_that_name():
    assert prom_sum(METRICS, HITS) == 192.0
    assert prom_sum(METRICS, "vllm:external_prefix_cache_queries_total") == 512.0
    # neither a longer name nor a shorter one is the metric
    assert prom_sum(METRICS, "vllm:external_prefix_cache_hits") is None
    assert prom_sum(METRICS, "vllm:external_prefix_cache_hits_total_other") == 1000.0


def test_absent_metric_is_none_and_zero_is_zero():
    assert prom_sum(METRICS, "vllm:num_requests_running") is None
    assert prom_sum("", HITS) is None
    assert prom_sum(None, HITS) is None
    assert prom_sum("%s 0\n" % HITS, HITS) == 0.0


def test_comments_that_name_the_metric_are_not_samples():
    text = "# HELP %s 5\n# TYPE %s counter\n#%s 7\n" % (HITS, HITS, HITS)
    assert prom_sum(text, HITS) is None


def test_sample_without_labels_with_timestamp_and_exponent():
    text = "up 1\nup{job=\"a\"} 2 1700000000000\nup 3e2\nup -1.5\n"
    assert prom_sum(text, "up") == 1 + 2 + 300 - 1.5


def test_label_values_with_spaces_braces_and_escaped_quotes():
    # label values may hold any character; a "}" inside one ended the label set before (sample lost)
    text = ('m{path="/a b"} 1\n'
            'm{path="/x}y"} 2\n'
            'm{msg="say \\"hi\\"",other="{}"} 4\n'
            'm{a="back\\\\slash"} 8\n')
    assert prom_sum(text, "m") == 15.0


def test_unreadable_values_and_lines_are_skipped():
    text = "m 1\nm not-a-number\nm{a=\"b\"}\nm\nm{unclosed=\"x} 5\n\nm 2\n"
    # a value that is no float, a line without a value and a broken label set are not samples
    assert prom_sum(text, "m") == 3.0
    assert prom_sum("m garbage\n", "m") is None


def test_nan_and_infinities_are_float_values():
    assert math.isnan(prom_sum("m NaN\nm 1\n", "m"))  # NaN poisons the sum: a comparison with it is false
    assert prom_sum("m +Inf\nm 1\n", "m") == math.inf
    assert prom_sum("m -Inf\n", "m") == -math.inf
    assert math.isnan(prom_sum("m +Inf\nm -Inf\n", "m"))


def test_crlf_line_ends():
    assert prom_sum("m 1\r\nm{a=\"b\"} 2\r\n", "m") == 3.0


# --- agreement with prometheus_client's parser (the one parser of the benchmarks and the tests) ----------------

def client_sum(text, name):
    """What prometheus_client reads: the sum of the samples named `name` (None when there is none)."""
    from prometheus_client.parser import text_string_to_metric_families
    values = [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
    return float(sum(values)) if values else None


# Each a valid exposition. The first ones are where the three parsers of this repository disagreed: a label value
# holding "}" or an escaped quote, backslash or newline.
AGREED = [
    'm{path="/x}y"} 2\n',
    'm{msg="say \\"hi\\"",other="{}"} 4\n',
    'm{a="back\\\\slash"} 8\n',
    'm{a="ends in a backslash\\\\"} 16\n',
    'm{a="line\\nbreak"} 32\n',
    'm{a="\\"}"} 1\n',
    'm{a="}",b="\\\\"} 2\n',
    'm{a="\\\\\\"}"} 3\n',
    'm{a="#"} 1\nm{a="} 9"} 2\n',
    'm{a="x",} 1\nm{} 2\nm { a = "b" } 4\nm{a="x"}8\n',
    ' m 9\n\tm 1\n',
    'm\t3 1700000000\nm 1 2\n',
    'm 1e3\nm -1.5\nm_total 7\nmm 7\n# m 9\n#m 9\nx{m="1"} 9\n',
    'm +Inf\nm 1\n',
    'm -Inf\n',
    'other 1\n',
    '',
]


@pytest.mark.parametrize("text", AGREED)
def test_reads_every_sample_as_prometheus_client_does(text):
    assert prom_sum(text, "m") == client_sum(text, "m")


@pytest.mark.parametrize("text, want", [
    ('m{path="/x}y"} 2\n', 2.0),
    ('m{msg="say \\"hi\\""} 4\n', 4.0),
    ('m{a="back\\\\"} 8\n', 8.0),
    ('m{a="line\\nbreak"} 32\n', 32.0),
])
def test_the_label_values_that_were_read_differently_are_samples(text, want):
    # pinned as well as compared: a case where both parsers read nothing would agree too
    assert prom_sum(text, "m") == client_sum(text, "m") == want


def test_agrees_on_what_prometheus_client_writes():
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    registry = CollectorRegistry()
    counter = Counter("vllm:external_prefix_cache_hits", "hits", ["engine", "path"], registry=registry)
    for i, path in enumerate(['/x}y', 'say "hi"', 'back\\', 'two\nlines', '{}', 'a="b"} 9', '']):
        counter.labels(engine=str(i), path=path).inc(2 ** i)
    text = generate_latest(registry).decode()
    assert '\\"' in text and '\\\\' in text and '\\n' in text and '}y"' in text
    assert prom_sum(text, HITS) == client_sum(text, HITS) == 127.0
    created = "vllm:external_prefix_cache_hits_created"
    assert prom_sum(text, created) == client_sum(text, created) > 0


@pytest.mark.parametrize("bad", [
    'm abc', 'm{a="b"}', 'm', 'm{unclosed="x} 5', 'm 1_0', 'm{a=b} 1', 'm{a="x"', 'm{="x"} 1',
])
def test_a_line_prometheus_client_refuses_is_skipped(bad):
    # prometheus_client refuses the whole text; the filter reads the other samples
    text = "m 1\n%s\nm 2\n" % bad
    with pytest.raises(ValueError):
        client_sum(text, "m")
    assert prom_sum(text, "m") == 3.0
