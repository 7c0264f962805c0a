# -*- coding: utf-8 -*-
"""a3proxy.rotation: drain, the selection among undrained servers, the upstream's load counts and the ledger."""
from __future__ import annotations

import pytest
from a3proxy import auth, core
from a3proxy import rotation as r

from proxy_fakes import FakeServer, fake_upstream, options


def server(host, port, tokens=0.0, kv=0.0):
    s = FakeServer(host, port)
    s.active_tokens, s.active_kv_cache = tokens, kv
    return s


def test_parse_backend_list_names_known_backends_once_sorted():
    known = ["h2:2", "h1:1", "h3:3"]
    assert r.parse_backend_list(b'{"backends": ["h2:2", "h1:1", "h2:2"]}', known) == ["h1:1", "h2:2"]


@pytest.mark.parametrize("body", [b"", b"[]", b'{"backends": []}', b'{"backends": "h1:1"}',
                                  b'{"backends": [1]}', b'{"backend": ["h1:1"]}', b"not json"])
def test_parse_backend_list_refuses_a_bad_body(body):
    with pytest.raises(ValueError, match=r'\{"backends": \["host:port"'):
        r.parse_backend_list(body, ["h1:1"])


def test_parse_backend_list_names_the_unknown_and_the_known():
    with pytest.raises(ValueError) as err:
        r.parse_backend_list(b'{"backends": ["h1:1", "x:9", "y:8"]}', ["h1:1", "h2:2"])
    assert str(err.value) == "unknown backends x:9, y:8: the proxy has h1:1, h2:2"


def test_choose_undrained_takes_the_least_loaded_server_that_is_not_drained():
    servers = [server("a", 1, tokens=0.0), server("b", 2, tokens=50.0), server("c", 3, tokens=900.0)]
    assert r.choose_undrained(servers, set(), [], "decode") == 0
    assert r.choose_undrained(servers, {"a:1"}, [], "decode") == 1  # the least loaded is drained: the next one
    assert r.choose_undrained(servers, {"a:1"}, [servers[1]], "decode") == 2  # tainted by the upstream too
    assert r.choose_undrained(servers, {"a:1", "b:2", "c:3"}, [], "decode") is None


def test_choose_undrained_weighs_prefill_kv_like_the_upstream_and_breaks_ties_by_index():
    servers = [server("a", 1, tokens=10.0, kv=100.0), server("b", 2, tokens=30.0), server("c", 3, tokens=30.0)]
    assert r.choose_undrained(servers, set(), [], "prefill") == 1  # 10 + 0.3 x 100 = 40 > 30
    assert r.choose_undrained(servers, set(), [], "decode") == 0   # decode ignores the KV held
    assert r.choose_undrained(servers, {"a:1"}, [], "decode") == 1  # b and c tie: the lower index


def test_outstanding_load_counts_prefill_kv_until_decode_pulled_it():
    assert r.outstanding_load(server("p", 1, tokens=0.0, kv=120.5), "prefill") == 120.5
    assert r.outstanding_load(server("d", 1, tokens=30.0, kv=99.0), "decode") == 30.0


def test_what_the_upstreams_float_scores_leave_on_an_idle_backend_shows_as_no_load():
    """The upstream books and releases float scores (a prefill's: 120.0745 + request bytes / 4 x 0.0345): an idle
    backend is left with a rounding rest, slightly below zero here. /a3/backends (the core's snapshots) shows it
    as 0.0, not -0.0 or -2.8e-14; a real load still shows."""
    up = fake_upstream()
    proxy = core.HonestProxy(up, options(), auth.NO_SECRETS)
    prefill, decode = up.proxy_state.prefillers[0], up.proxy_state.decoders[0]
    scores = [120.0745 + length / 4.0 * 0.0345 for length in (7, 1013, 33)]
    for score in scores:
        prefill.active_tokens += score
        prefill.active_kv_cache += score
    for score in scores:
        prefill.active_tokens -= score
        prefill.active_kv_cache -= score
    rest = r.outstanding_load(prefill, "prefill")
    assert rest != 0.0 and abs(rest) < 1e-9  # the rest is there, and it is rounding
    decode.active_tokens = 0.25
    shown = {s["backend"]: s["outstanding_load"] for s in proxy.snapshots()}
    assert shown == {"10.0.0.1:1": 0.0, "10.0.0.2:2": 0.25}
    assert str(shown["10.0.0.1:1"]) == "0.0"


def test_index_of_finds_the_object_not_an_equal_one():
    a, b = server("h", 1), server("h", 1)
    assert r.index_of([b, a], a) == 1 and r.index_of([b], a) is None


def test_ledger_of_a_request_that_ends_well_is_empty():
    p, d = server("p", 1), server("d", 2)
    ledger = r.LoadLedger()
    ledger.book("prefill", p, 120.5, 120.5)
    assert ledger.release("prefill", "tokens", 120.5) == (p, 120.5)
    ledger.book("decode", d, 30.0)
    assert ledger.release("prefill", "kv", 120.5) == (p, 120.5)
    assert ledger.release("decode", "tokens", 30.0) == (d, 30.0)
    assert ledger.settle() == []
    assert ledger.backends() == {"p:1", "d:2"}


def test_ledger_settles_what_a_failed_request_left():
    p, d = server("p", 1), server("d", 2)
    ledger = r.LoadLedger()
    ledger.book("prefill", p, 120.0, 120.0)
    ledger.release("prefill", "tokens", 120.0)
    ledger.book("decode", d, 30.0)
    assert ledger.settle() == [("prefill", p, 0.0, 120.0), ("decode", d, 30.0, 0.0)]
    assert ledger.settle() == []
    # a release of the upstream after the settle finds nothing: no count goes below what it booked
    assert ledger.release("decode", "tokens", 30.0) == (None, 0.0)


def test_ledger_matches_a_release_to_the_latest_booking_of_the_role():
    """The upstream's "recomputed" retry selects a second pair mid-stream and releases only that one."""
    p1, d1, p2, d2 = server("p", 1), server("d", 1), server("p", 2), server("d", 2)
    ledger = r.LoadLedger()
    ledger.book("prefill", p1, 100.0, 100.0)
    ledger.release("prefill", "tokens", 100.0)
    ledger.book("decode", d1, 10.0)
    ledger.release("prefill", "kv", 100.0)
    ledger.book("prefill", p2, 200.0, 200.0)
    assert ledger.release("prefill", "tokens", 200.0) == (p2, 200.0)
    ledger.book("decode", d2, 20.0)
    assert ledger.release("decode", "tokens", 20.0) == (d2, 20.0)
    assert ledger.settle() == [("decode", d1, 10.0, 0.0), ("prefill", p2, 0.0, 200.0)]


def test_ledger_never_releases_more_than_was_booked():
    d = server("d", 1)
    ledger = r.LoadLedger()
    ledger.book("decode", d, 10.0)
    assert ledger.release("decode", "tokens", 25.0) == (d, 10.0)
    assert ledger.release("decode", "tokens", 25.0) == (None, 0.0)
    assert ledger.release("prefill", "tokens", 1.0) == (None, 0.0)
    with pytest.raises(ValueError):
        ledger.release("decode", "both", 1.0)


# ----------------------------------------------------------------------------- every text and edge, exactly

def test_parse_backend_list_texts():
    with pytest.raises(ValueError) as err:
        r.parse_backend_list(b"[]", ["h1:1"])
    assert str(err.value) == ('the body must be a JSON object {"backends": ["host:port", ...]} with at least one '
                              'backend')
    with pytest.raises(ValueError) as err:
        r.parse_backend_list(b'{"backends": ["x:9"]}', ["h2:2", "h1:1", "h1:1"])
    assert str(err.value) == "unknown backend x:9: the proxy has h1:1, h2:2"
    with pytest.raises(ValueError) as err:
        r.parse_backend_list(b'{"backends": ["x:9"]}', [])
    assert str(err.value) == "unknown backend x:9: the proxy has none"
    with pytest.raises(ValueError):
        r.parse_backend_list(b'{"backends": [""]}', [""])


def test_choose_undrained_counts_the_tokens_and_none_as_zero():
    servers = [server("a", 1, tokens=50.0), server("b", 2, tokens=0.0)]
    assert r.choose_undrained(servers, set(), [], "decode") == 1
    servers = [server("a", 1, tokens=None), server("b", 2, tokens=0.5)]
    assert r.choose_undrained(servers, set(), [], "decode") == 0


def test_choose_undrained_adds_three_tenths_of_the_kv_to_the_tokens_of_a_prefill():
    servers = [server("a", 1, tokens=100.0), server("b", 2, tokens=0.0, kv=10.0)]
    assert r.choose_undrained(servers, set(), [], "prefill") == 1   # 100 against 3
    servers = [server("a", 1, tokens=0.0, kv=100.0), server("b", 2, tokens=50.0)]
    assert r.choose_undrained(servers, set(), [], "prefill") == 0   # 30 against 50
    servers = [server("a", 1, tokens=0.0, kv=None), server("b", 2, tokens=0.1, kv=0.5)]
    assert r.choose_undrained(servers, set(), [], "prefill") == 0   # 0 against 0.25


def test_choose_undrained_skips_a_tainted_server_by_identity():
    servers = [server("a", 1), server("a", 1, tokens=5.0)]
    assert r.choose_undrained(servers, set(), [server("a", 1)], "decode") == 0
    assert r.choose_undrained(servers, set(), [servers[0]], "decode") == 1


def test_outstanding_load_adds_tokens_and_kv_of_a_prefill():
    assert r.outstanding_load(server("p", 1, tokens=10.0, kv=5.0), "prefill") == 15.0
    assert r.outstanding_load(server("p", 1, tokens=None, kv=None), "prefill") == 0.0
    assert r.outstanding_load(server("p", 1, tokens=None, kv=7.0), "decode") == 0.0


def test_ledger_releases_and_settles_what_is_below_one():
    d = server("d", 1)
    ledger = r.LoadLedger()
    ledger.book("decode", d, 0.5)
    assert ledger.release("decode", "tokens", 2) == (d, 0.5)
    ledger.book("prefill", d, 0.5, 0.25)
    assert ledger.settle() == [("prefill", d, 0.5, 0.25)]
    ledger.book("prefill", d, 0.0, 0.25)
    assert ledger.settle() == [("prefill", d, 0.0, 0.25)]


def test_ledger_book_returns_its_entry_and_refuses_an_unknown_kind():
    d = server("d", 1)
    ledger = r.LoadLedger()
    assert ledger.book("decode", d, 3) == {"role": "decode", "server": d, "tokens": 3.0, "kv": 0.0}
    with pytest.raises(ValueError) as err:
        ledger.release("decode", "both", 1.0)
    assert str(err.value) == "kind must be one of ('tokens', 'kv'), got 'both'"
