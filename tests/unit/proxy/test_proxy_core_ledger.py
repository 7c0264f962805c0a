# -*- coding: utf-8 -*-
"""a3proxy.core, its bookkeeping: the selection pinned around drained backends, the releases matched to the
server a request booked, what a request's end settles, and the view of each backend (rotation, load, hosts)."""
from __future__ import annotations

import asyncio
import contextvars
import time

import pytest
from a3proxy import auth, core, engine
from a3proxy.etcd import parse_etcd_addresses

from proxy_fakes import FakeServer, fake_upstream, options

SECRETS = auth.Secrets((), "", "")


def make(prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), secrets=SECRETS, **opts):
    up = fake_upstream(prefills, decodes)
    proxy = core.HonestProxy(up, options(**opts), secrets)
    return proxy, up.proxy_state


def recorded(state):
    """Record the upstream's priority updates (its heap) on this ProxyState."""
    calls = []
    state._update_prefiller_priority = lambda index: calls.append(("prefill", index))
    state._update_decoder_priority = lambda index: calls.append(("decode", index))
    return calls


def in_request(fn):
    def run():
        request = engine.RequestState()
        request.activate()
        return request, fn(request)
    return contextvars.copy_context().run(run)


def releases(proxy):
    """Record the upstream's own releases that the proxy calls (after _pin_selection)."""
    calls = []

    def recorder(key):
        return lambda index, amount: calls.append(key + (index, amount))

    for key in list(proxy._release):
        proxy._release[key] = recorder(key)
    return calls


# ----------------------------------------------------------------------------- the selection around a drain

def test_a_drained_prefill_is_skipped_with_the_prefills_own_tainted_list():
    proxy, state = make(prefills=(("p", 1), ("p", 2), ("p", 3)), decodes=(("d", 1), ("d", 2)))
    proxy._pin_selection()
    calls = recorded(state)
    state.prefillers[2].active_tokens = 5.0
    state.tainted_prefillers.append(state.prefillers[1])
    state.tainted_decoders.append(state.decoders[1])
    proxy.drained.add("p:1")
    request, index = in_request(lambda request: state.select_prefiller(10.0))
    assert index == 2 and calls == [("prefill", 2)]
    assert (state.prefillers[2].active_tokens, state.prefillers[2].active_kv_cache) == (15.0, 10.0)
    assert request.ledger.entries == [{"role": "prefill", "server": state.prefillers[2], "tokens": 10.0, "kv": 10.0}]


def test_a_drained_selection_weighs_a_prefills_kv():
    proxy, state = make(prefills=(("p", 1), ("p", 2), ("p", 3)))
    proxy._pin_selection()
    state.prefillers[1].active_kv_cache = 100.0  # 30 counted
    state.prefillers[2].active_tokens = 20.0
    proxy.drained.add("p:1")
    _unused, index = in_request(lambda request: state.select_prefiller(1.0))
    assert index == 2


def test_a_drained_decode_selection_books_the_tokens_on_top_of_what_is_there():
    proxy, state = make(decodes=(("d", 1), ("d", 2)))
    proxy._pin_selection()
    calls = recorded(state)
    state.decoders[1].active_tokens = 4.0
    state.decoders[1].active_kv_cache = 3.0
    proxy.drained.add("d:1")
    request, index = in_request(lambda request: state.select_decoder(6.0))
    assert index == 1 and calls == [("decode", 1)]
    assert (state.decoders[1].active_tokens, state.decoders[1].active_kv_cache) == (10.0, 3.0)
    assert request.ledger.entries == [{"role": "decode", "server": state.decoders[1], "tokens": 6.0, "kv": 0.0}]


def test_a_drained_prefill_selection_adds_the_kv_to_what_is_there():
    proxy, state = make(prefills=(("p", 1), ("p", 2)))
    proxy._pin_selection()
    state.prefillers[1].active_kv_cache = 3.0
    proxy.drained.add("p:1")
    in_request(lambda request: state.select_prefiller(6.0))
    assert (state.prefillers[1].active_tokens, state.prefillers[1].active_kv_cache) == (6.0, 9.0)


def test_a_selection_outside_a_client_request_books_no_ledger():
    proxy, state = make(decodes=(("d", 1), ("d", 2)))
    proxy._pin_selection()
    proxy.drained.add("d:1")
    assert contextvars.copy_context().run(lambda: state.select_decoder(5.0)) == 1
    assert contextvars.copy_context().run(lambda: state.select_prefiller(5.0)) == 0
    assert state.decoders[1].active_tokens == 5.0 and state.prefillers[0].active_kv_cache == 5.0


def test_an_index_past_the_lists_end_books_nothing():
    up = fake_upstream()
    state = up.proxy_state
    state.select_decoder = lambda score: 1  # the upstream's selection racing a removal
    proxy = core.HonestProxy(up, options(), SECRETS)
    proxy._pin_selection()
    request, index = in_request(lambda request: state.select_decoder(5.0))
    assert index == 1 and request.ledger.entries == []


def test_without_a_drain_the_upstream_selects_and_the_ledger_books():
    proxy, state = make(decodes=(("d", 1), ("d", 2)))
    proxy._pin_selection()
    state.decoders[0].active_tokens = 1.0
    request, index = in_request(lambda request: state.select_decoder(5.0))
    assert index == 1 and request.ledger.entries == [{"role": "decode", "server": state.decoders[1], "tokens": 5.0,
                                                      "kv": 0.0}]


# ----------------------------------------------------------------------------- releases

def test_a_release_goes_through_the_upstreams_release_while_the_server_is_listed():
    proxy, state = make(prefills=(("p", 1), ("p", 2)), decodes=(("d", 1), ("d", 2)))
    proxy._pin_selection()
    calls = releases(proxy)
    request = engine.RequestState()
    request.ledger.book("prefill", state.prefillers[1], 10.0, 10.0)
    request.ledger.book("decode", state.decoders[1], 4.0)
    proxy._settle(request, aborted=False)
    assert calls == [("prefill", "tokens", 1, 10.0), ("prefill", "kv", 1, 10.0), ("decode", "tokens", 1, 4.0)]
    assert proxy.counters == {"a3_proxy_load_released_total": 2}


def test_a_release_of_a_server_that_left_the_list_goes_to_the_object():
    proxy, state = make()
    proxy._pin_selection()
    calls = releases(proxy)
    gone = FakeServer("p", 9)
    gone.active_tokens, gone.active_kv_cache = 100.0, 50.0
    proxy._apply_release("prefill", "tokens", gone, 30.0)
    proxy._apply_release("prefill", "kv", gone, 20.0)
    assert (gone.active_tokens, gone.active_kv_cache) == (70.0, 30.0) and calls == []
    gone.active_kv_cache = 0.0
    proxy._apply_release("prefill", "kv", gone, 5.0)
    assert gone.active_kv_cache == 0.0  # as the upstream: no KV released below nothing
    gone.active_kv_cache = 0.5
    proxy._apply_release("prefill", "kv", gone, 0.5)
    assert gone.active_kv_cache == 0.0
    proxy._apply_release("decode", "tokens", gone, 70.0)
    assert gone.active_tokens == 0.0


def test_the_settle_releases_only_what_is_left_however_small():
    proxy, state = make()
    proxy._pin_selection()
    calls = releases(proxy)
    request = engine.RequestState()
    request.ledger.book("prefill", state.prefillers[0], 0.0, 0.5)
    request.ledger.book("decode", state.decoders[0], 0.5)
    proxy._settle(request, aborted=False)
    assert calls == [("prefill", "kv", 0, 0.5), ("decode", "tokens", 0, 0.5)]


def test_an_aborted_request_tells_only_a_listed_prefill_holding_its_kv_to_drop_it():
    proxy, state = make(prefills=(("p", 1), ("p", 2)))
    proxy._pin_selection()
    gone = FakeServer("p", 9)
    request = engine.RequestState()
    request.ledger.book("prefill", state.prefillers[1], 0.0, 5.0)
    request.ledger.book("prefill", gone, 0.0, 5.0)
    request.ledger.book("prefill", state.prefillers[0], 5.0, 0.0)
    request.request_ids = {"p:2": {"b", "a"}, "p:9": {"c"}, "p:1": {"d"}}
    proxy._settle(request, aborted=True)
    assert state.aborted == [("p:2", "a"), ("p:2", "b")]


# ----------------------------------------------------------------------------- each backend's view

def test_in_rotation_means_listed_and_not_tainted():
    proxy, state = make(decodes=(("d", 1), ("d", 2)))
    d1 = proxy.backends[("decode", "d:1")]
    assert proxy.in_rotation(d1)
    state.tainted_decoders.append(state.decoders[1])
    assert proxy.in_rotation(d1)
    state.tainted_decoders.append(state.decoders[0])
    assert not proxy.in_rotation(d1)
    state.decoders.pop(0)
    state.tainted_decoders[:] = []
    assert not proxy.in_rotation(d1)
    proxy.up.proxy_state = None
    assert not proxy.in_rotation(d1)


def test_the_snapshots_show_the_drain_and_the_load_of_each_role():
    proxy, state = make()
    state.prefillers[0].active_tokens, state.prefillers[0].active_kv_cache = 10.0, 5.0
    state.decoders[0].active_tokens, state.decoders[0].active_kv_cache = 3.0, 7.0
    proxy.drained.add("10.0.0.2:2")
    shown = [(s["backend"], s["drained"], s["outstanding_load"], s["in_rotation"]) for s in proxy.snapshots()]
    assert shown == [("10.0.0.1:1", False, 15.0, True), ("10.0.0.2:2", True, 3.0, True)]


def test_hosts_are_the_backends_the_ds_workers_and_etcd():
    proxy, _unused = make(decodes=(("node-d1", 2),), a3_ds_worker=["[fe80::1]:9000", "NODEX:31501"],
                          a3_etcd_endpoint=parse_etcd_addresses("https://etcd-1:2379"))
    assert proxy.hosts() == {"10.0.0.1", "node-d1", "fe80::1", "NODEX", "etcd-1"}
    assert proxy.scrub("down: node-d1:2, NODEX:31501 and fe80::1") == (
        "down: [address hidden], [address hidden] and [address hidden]")
    proxy, _unused = make()
    assert proxy.hosts() == {"10.0.0.1", "10.0.0.2"}
    proxy, _unused = make(a3_etcd_endpoint=parse_etcd_addresses("etcd-1:2379,etcd-2:2379,[fd00::3]:2379"))
    assert proxy.hosts() == {"10.0.0.1", "10.0.0.2", "etcd-1", "etcd-2", "fd00::3"}
    assert proxy.scrub("etcd-2:2379 and fd00::3 refused") == "[address hidden] and [address hidden] refused"


def test_counts_add_up():
    proxy, _unused = make()
    proxy.count("a")
    proxy.count("a", 2)
    proxy.count_request("/x", 200)
    proxy.count_request("/x", "200")
    proxy.count_request("/x", 503)
    assert proxy.counters == {"a": 3} and proxy.requests == {("/x", "200"): 2, ("/x", "503"): 1}


# ----------------------------------------------------------------------------- what the proxy starts with

def test_the_backends_of_the_command_line_are_tracked_from_the_start():
    before = time.time()
    proxy, _unused = make(prefills=(("p", 1), ("p", 1)), decodes=(("d", 2),), a3_fail_threshold=4)
    assert before <= proxy.started <= time.time()
    assert [(key, b.state, b.threshold, b.last_change_time, b.last_change_reason)
            for key, b in proxy.backends.items()] == [
        (("prefill", "p:1"), "unknown", 4, proxy.started, "listed on the command line"),
        (("decode", "d:2"), "unknown", 4, proxy.started, "listed on the command line")]
    assert proxy.drained == set() and proxy.open == set() and proxy.counters == {} and proxy.requests == {}
    assert proxy.retry_after == [(b"retry-after", b"10")]


def test_the_state_before_the_first_etcd_read():
    proxy, _unused = make()
    assert (proxy.etcd, proxy.etcd_ok, proxy.ds_workers) == (None, None, None)
    assert proxy.admission.limit == options().a3_max_inflight and proxy.admission.open == 0
    endpoint = parse_etcd_addresses("http://etcd-1:2379")
    proxy, _unused = make(a3_etcd_endpoint=endpoint, a3_max_inflight=3, a3_retry_after=7)
    assert (proxy.etcd, proxy.etcd_ok, proxy.ds_workers) == (endpoint, False, None)
    assert proxy.admission.limit == 3 and proxy.retry_after == [(b"retry-after", b"7")]


@pytest.mark.parametrize("key, header", [("bk-1", "Bearer bk-1"), ("", None)])
def test_the_servers_the_upstream_makes_carry_the_backend_key(key, header):
    proxy, _unused = make(secrets=auth.Secrets((), "", key))
    assert proxy.secrets.backend_api_key == key
    server = proxy.up.ServerState("h", 1)
    request = type("Request", (), {})()
    request.headers = {"Authorization": "Bearer None"}
    request.url = None
    asyncio.run(server.client.event_hooks["request"][0](request))
    assert request.headers.get("Authorization") == header
