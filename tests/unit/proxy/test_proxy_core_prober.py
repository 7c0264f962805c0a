# -*- coding: utf-8 -*-
"""a3proxy.core, the prober: one probe and what it reports, the etcd read, a probe round's changes to the
upstream rotation and its log lines, the probe loop's pace, and start and stop (stand-in httpx clients, no
socket)."""
from __future__ import annotations

import asyncio
import contextlib
import time
import types

import httpx
import pytest
from a3proxy import auth, core
from a3proxy.etcd import ds_range_request, parse_etcd_addresses

from proxy_fakes import FakeServer, fake_upstream, options

SECRETS = auth.Secrets((), "", "")
P, D = "10.0.0.1:1", "10.0.0.2:2"


class Client(object):
    """An httpx.AsyncClient stand-in: answers[url] is a status, an exception, a (delay, status) pair or an
    httpx.Response; every call is recorded."""

    def __init__(self, answers=None, **kwargs):
        self.answers = dict(answers or {})
        self.kwargs = kwargs
        self.calls = []
        self.closed = 0

    async def _answer(self, url):
        answer = self.answers[url]
        if isinstance(answer, tuple):
            await asyncio.sleep(answer[0])
            answer = answer[1]
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(answer, request=httpx.Request("GET", url))

    async def get(self, url, **kwargs):
        self.calls.append(("GET", url, kwargs))
        return await self._answer(url)

    async def post(self, url, **kwargs):
        self.calls.append(("POST", url, kwargs))
        return await self._answer(url)

    async def aclose(self):
        self.closed += 1


class Closable(FakeServer):
    """The upstream's ServerState with a client that can be closed."""
    closed = []

    def __init__(self, host, port):
        FakeServer.__init__(self, host, port)
        self.client = types.SimpleNamespace(event_hooks={}, aclose=self._aclose)

    async def _aclose(self):
        Closable.closed.append(str(self))

    def __eq__(self, other):  # as the upstream's: one backend, whatever object
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


def make(prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), **opts):
    up = fake_upstream(prefills, decodes)
    up.ServerState = type("ServerState", (Closable,), {})
    proxy = core.HonestProxy(up, options(**opts), SECRETS)
    return proxy, up.proxy_state


# ----------------------------------------------------------------------------- one probe

def probe(proxy, backend, answers, **kwargs):
    proxy._probe_client = Client(answers)
    result = asyncio.run(proxy._probe(backend))
    return result, proxy._probe_client.calls


@pytest.mark.parametrize("answer, want", [
    (200, (True, "HTTP 200")),
    (204, (False, "HTTP 204")),
    (503, (False, "HTTP 503")),
    (httpx.ConnectTimeout("slow"), (False, "no answer within 2s")),
    (httpx.ConnectError("All connection attempts failed"), (False, "ConnectError: All connection attempts failed")),
    (httpx.RemoteProtocolError(""), (False, "RemoteProtocolError: connection failed")),
    (ConnectionRefusedError(111, "refused"), (False, "ConnectionRefusedError: [Errno 111] refused")),
])
def test_a_probe_reports_what_it_saw(answer, want):
    proxy, _unused = make()
    result, calls = probe(proxy, proxy.backends[("decode", D)], {"http://10.0.0.2:2/health": answer})
    assert result == want and calls == [("GET", "http://10.0.0.2:2/health", {})]


def test_a_probe_of_an_ipv6_backend_brackets_the_address():
    proxy, _unused = make(decodes=(("fe80::1", 5),))
    result, calls = probe(proxy, proxy.backends[("decode", "fe80::1:5")], {"http://[fe80::1]:5/health": 200})
    assert result == (True, "HTTP 200") and calls[0][1] == "http://[fe80::1]:5/health"


def test_a_probe_waits_half_a_second_longer_than_the_clients_timeout():
    proxy, _unused = make(a3_probe_timeout=0.1)
    backend = proxy.backends[("decode", D)]
    assert probe(proxy, backend, {"http://10.0.0.2:2/health": (0.4, 200)})[0] == (True, "HTTP 200")
    began = time.monotonic()
    assert probe(proxy, backend, {"http://10.0.0.2:2/health": (3.0, 200)})[0] == (False, "no answer within 0.1s")
    assert time.monotonic() - began < 1.5


# ----------------------------------------------------------------------------- the etcd read

ETCD = "http://etcd-1:2379"
RANGE = ETCD + "/v3/kv/range"


def etcd_answer(**workers):
    import base64
    kvs = [{"key": base64.b64encode(("/datasystem/cluster/" + w).encode()).decode(),
            "value": base64.b64encode(v.encode()).decode()} for w, v in workers.items()]
    return httpx.Response(200, json={"kvs": kvs}, request=httpx.Request("POST", RANGE))


def etcd_proxy(**opts):
    proxy, _unused = make(a3_etcd_endpoint=parse_etcd_addresses(ETCD), a3_ds_worker=["w1", "w2"], **opts)
    proxy._etcd_client = Client()
    return proxy


def test_without_etcd_nothing_is_read():
    proxy, _unused = make()
    proxy._etcd_client = Client()
    assert asyncio.run(proxy.read_ds_workers()) is None
    assert proxy._etcd_client.calls == [] and (proxy.etcd_ok, proxy.ds_workers) == (None, None)


def test_the_etcd_read_keeps_the_workers_states_and_logs_who_is_missing_when_that_changes(logs):
    proxy = etcd_proxy(a3_probe_timeout=0.1)
    client = proxy._etcd_client
    client.answers[RANGE] = (0.4, etcd_answer(w1="1;ready"))  # within the probe timeout and a half second
    asyncio.run(proxy.read_ds_workers())
    assert client.calls == [("POST", RANGE, {"json": ds_range_request()})]
    assert (proxy.etcd_ok, proxy.ds_workers) == (True, {"w1": 1, "w2": 0})
    assert logs() == [("WARNING", "datasystem workers not registered and ready in etcd: w2")]
    asyncio.run(proxy.read_ds_workers())
    assert logs() == []
    client.answers[RANGE] = etcd_answer(w1="1;starting")
    asyncio.run(proxy.read_ds_workers())
    assert proxy.ds_workers == {"w1": 0, "w2": 0}
    assert logs() == [("WARNING", "datasystem workers not registered and ready in etcd: w1, w2")]
    client.answers[RANGE] = etcd_answer(w1="1;ready", w2="2;ready", w3="3;ready")
    asyncio.run(proxy.read_ds_workers())
    assert (proxy.etcd_ok, proxy.ds_workers) == (True, {"w1": 1, "w2": 1, "w3": 1}) and logs() == []


@pytest.mark.parametrize("answer, text", [
    (httpx.ConnectError("refused"), "ConnectError: refused"),
    (httpx.Response(503, text="busy", request=httpx.Request("POST", RANGE)), "backend POST %s answered HTTP 503: "
     "busy" % RANGE),
    (httpx.Response(200, text="not json", request=httpx.Request("POST", RANGE)), "JSONDecodeError: Expecting "
                                                                                 "value: line 1 column 1 (char 0)"),
    ((1.0, 200), "TimeoutError: TimeoutError()"),  # more than the probe timeout and a half second
])
def test_a_failed_etcd_read_drops_the_states_and_is_logged_once(answer, text, logs):
    proxy = etcd_proxy(a3_probe_timeout=0.1)
    proxy._etcd_client.answers[RANGE] = etcd_answer(w1="1;ready", w2="1;ready")
    asyncio.run(proxy.read_ds_workers())
    assert proxy.etcd_ok is True and logs() == []
    proxy._etcd_client.answers[RANGE] = answer
    asyncio.run(proxy.read_ds_workers())
    assert (proxy.etcd_ok, proxy.ds_workers) == (False, None)
    assert logs() == [("WARNING", "etcd %s: cannot read the datasystem workers' registrations: %s" % (ETCD, text))]
    asyncio.run(proxy.read_ds_workers())
    assert (proxy.etcd_ok, proxy.ds_workers) == (False, None) and logs() == []


# ----------------------------------------------------------------------------- the etcd read, an etcd cluster

MEMBERS = ("http://etcd-1:2379", "http://etcd-2:2379", "http://etcd-3:2379")
R1, R2, R3 = (m + "/v3/kv/range" for m in MEMBERS)


def cluster_proxy(**opts):
    proxy, _unused = make(a3_etcd_endpoint=parse_etcd_addresses(",".join(MEMBERS)), a3_ds_worker=["w1", "w2"],
                          **opts)
    proxy._etcd_client = Client()
    return proxy


def busy(url):
    return httpx.Response(503, request=httpx.Request("POST", url))


def read(proxy, **answers):
    """One read with these answers ({"R1": ...}); the URLs it posted to."""
    client = proxy._etcd_client
    client.answers.update({{"R1": R1, "R2": R2, "R3": R3}[k]: v for k, v in answers.items()})
    client.calls = []
    asyncio.run(proxy.read_ds_workers())
    assert all(c[0] == "POST" and c[2] == {"json": ds_range_request()} for c in client.calls)
    return [c[1] for c in client.calls]


def test_a_cluster_read_takes_the_first_member_that_answers(logs):
    proxy = cluster_proxy()
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (False, None, None)
    assert read(proxy, R1=etcd_answer(w1="1;ready", w2="1;ready"), R2=503, R3=503) == [R1]
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (True, {"w1": 1, "w2": 1}, 0)
    assert logs() == []


def test_a_cluster_read_fails_over_to_the_next_member_and_keeps_to_it(logs):
    proxy = cluster_proxy()
    assert read(proxy, R1=etcd_answer(w1="1;ready", w2="1;ready"), R2=etcd_answer(w1="1;ready"),
                R3=etcd_answer()) == [R1]
    logs()
    # etcd-1 refuses: etcd-2 answers within the same read
    assert read(proxy, R1=httpx.ConnectError("refused")) == [R1, R2]
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (True, {"w1": 1, "w2": 0}, 1)
    assert logs() == [("INFO", "etcd http://etcd-2:2379 answered the read after http://etcd-1:2379 failed: "
                               "ConnectError: refused"),
                      ("WARNING", "datasystem workers not registered and ready in etcd: w2")]
    # the next read asks etcd-2 first, and only it (etcd-1 would answer again, it is not asked)
    assert read(proxy, R1=etcd_answer(w1="1;ready", w2="1;ready")) == [R2]
    assert proxy.ds_workers == {"w1": 1, "w2": 0} and logs() == []
    # etcd-2 goes too: etcd-1 is next in the list's order, before etcd-3
    assert read(proxy, R2=httpx.ConnectError("gone")) == [R2, R1]
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (True, {"w1": 1, "w2": 1}, 0)
    assert logs() == [("INFO", "etcd http://etcd-1:2379 answered the read after http://etcd-2:2379 failed: "
                               "ConnectError: gone")]
    assert read(proxy) == [R1] and logs() == []


def test_a_cluster_read_goes_to_the_last_member_when_the_others_fail(logs):
    proxy = cluster_proxy()
    assert read(proxy, R1=httpx.ConnectError("refused"), R2=busy(R2),
                R3=etcd_answer(w1="1;ready", w2="2;ready")) == [R1, R2, R3]
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (True, {"w1": 1, "w2": 1}, 2)
    assert logs() == [("INFO", "etcd http://etcd-3:2379 answered the read after http://etcd-1:2379,"
                               "http://etcd-2:2379 failed: http://etcd-1:2379: ConnectError: refused; "
                               "http://etcd-2:2379: backend answered HTTP 503")]
    assert read(proxy) == [R3]


def test_a_cluster_read_no_member_answers_is_one_warning_naming_them_all(logs):
    proxy = cluster_proxy()
    read(proxy, R1=503, R2=etcd_answer(w1="1;ready", w2="1;ready"), R3=503)
    assert (proxy.etcd_ok, proxy.etcd_last_good) == (True, 1)
    logs()
    down = {"R1": httpx.ConnectError("refused"), "R2": httpx.ConnectError("gone"), "R3": busy(R3)}
    assert read(proxy, **down) == [R2, R1, R3]   # the last good one first, then the others in order
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (False, None, 1)
    assert logs() == [("WARNING", "etcd http://etcd-2:2379,http://etcd-1:2379,http://etcd-3:2379: cannot read the "
                                  "datasystem workers' registrations: http://etcd-2:2379: ConnectError: gone; "
                                  "http://etcd-1:2379: ConnectError: refused; http://etcd-3:2379: backend answered "
                                  "HTTP 503")]
    assert read(proxy) == [R2, R1, R3]   # still down: every member tried again, no second warning
    assert (proxy.etcd_ok, proxy.ds_workers) == (False, None) and logs() == []
    # one member back ends the outage; its workers' states come back with it
    assert read(proxy, R3=etcd_answer(w1="1;ready", w2="1;ready")) == [R2, R1, R3]
    assert (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good) == (True, {"w1": 1, "w2": 1}, 2)
    assert [level for level, _unused in logs()] == ["INFO"]
    assert read(proxy, **down) == [R3, R1, R2]
    assert proxy.etcd_ok is False and [level for level, _unused in logs()] == ["WARNING"]


def test_a_cluster_read_shares_one_probe_timeout_among_the_members(logs):
    proxy = cluster_proxy(a3_probe_timeout=1.0)
    began = time.monotonic()
    # 1.5 s for the read, 0.5 s for each of three members: etcd-1 hangs past its share, etcd-2 answers within its own
    assert read(proxy, R1=(3.0, 200), R2=(0.3, etcd_answer(w1="1;ready", w2="1;ready"))) == [R1, R2]
    assert 0.75 <= time.monotonic() - began < 1.1
    assert (proxy.etcd_ok, proxy.etcd_last_good) == (True, 1)
    assert logs()[0] == ("INFO", "etcd http://etcd-2:2379 answered the read after http://etcd-1:2379 failed: "
                                 "TimeoutError: TimeoutError()")


def test_members_that_all_hang_end_the_read_within_one_probe_timeout(logs):
    proxy = cluster_proxy(a3_probe_timeout=0.4)
    began = time.monotonic()
    assert read(proxy, R1=(3.0, 200), R2=(3.0, 200), R3=(3.0, 200)) == [R1, R2, R3]
    assert 0.85 <= time.monotonic() - began < 1.3   # 0.4 + 0.5 s in all, not 0.9 s each
    assert (proxy.etcd_ok, proxy.ds_workers) == (False, None)


# ----------------------------------------------------------------------------- probe rounds

HP, HD = "http://10.0.0.1:1/health", "http://10.0.0.2:2/health"


def round_of(proxy, **answers):
    proxy._probe_client.answers.update(answers)
    asyncio.run(proxy.probe_round())


def test_probe_rounds_take_a_failing_backend_out_and_put_it_back(logs):
    proxy, state = make(a3_fail_threshold=2)
    proxy._probe_client = Client({HP: 200, HD: 200})
    round_of(proxy)
    assert logs() == [("INFO", "prefill backend 10.0.0.1:1: unknown -> up: first /health probe succeeded (HTTP 200)"),
                      ("INFO", "decode backend 10.0.0.2:2: unknown -> up: first /health probe succeeded (HTTP 200)")]
    round_of(proxy)
    assert logs() == []
    round_of(proxy, **{HD: 500})
    assert logs() == [("WARNING", "decode backend 10.0.0.2:2: probe failed (1 of 2 before it leaves the rotation): "
                                  "HTTP 500")]
    assert [str(s) for s in state.decoders] == [D]
    round_of(proxy)
    assert logs() == [("WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: 2 consecutive failed /health "
                                  "probes (last: HTTP 500)")]
    assert state.decoders == [] and proxy.counters == {"a3_proxy_rotation_changes_total": 1}
    round_of(proxy)
    assert logs() == [] and proxy.counters == {"a3_proxy_rotation_changes_total": 1}
    Closable.closed[:] = []
    round_of(proxy, **{HD: 200})
    assert logs() == [("WARNING", "decode backend 10.0.0.2:2: back in the rotation: /health answers again "
                                  "(HTTP 200)")]
    assert [str(s) for s in state.decoders] == [D] and isinstance(state.decoders[0], Closable)
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 2} and Closable.closed == []
    assert [c[1] for c in proxy._probe_client.calls] == [HP, HD] * 6


def test_a_backend_put_back_by_hand_while_its_probes_fail_is_taken_out_again(logs):
    proxy, state = make(a3_fail_threshold=1)
    proxy._probe_client = Client({HP: 200, HD: 500})
    round_of(proxy)
    assert state.decoders == [] and logs()[-1] == (
        "WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: 1 consecutive failed /health probes (last: "
                   "HTTP 500)")
    state.add_decoders([FakeServer("10.0.0.2", 2)])  # /instances/add
    round_of(proxy)
    assert state.decoders == [] and logs() == [
        ("WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: still in the upstream rotation while its "
                    "probes fail")]
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 2}


def test_a_backend_removed_by_hand_stays_out_while_healthy(logs):
    proxy, state = make()
    proxy._probe_client = Client({HP: 200, HD: 200})
    round_of(proxy)
    logs()
    state.remove_decoders(list(state.decoders))  # /instances/remove
    round_of(proxy)
    assert state.decoders == [] and logs() == [] and proxy.counters == {}


def test_a_failing_backend_that_already_left_the_rotation_is_only_logged(logs):
    proxy, state = make(a3_fail_threshold=1)
    state.decoders[:] = []
    proxy._probe_client = Client({HP: 200, HD: 500})
    round_of(proxy)
    assert logs()[-1] == ("WARNING", "decode backend 10.0.0.2:2: leaves the rotation (1 consecutive failed /health "
                                     "probes (last: HTTP 500)); it was not in the upstream rotation")
    assert proxy.counters == {}


def test_with_requests_in_flight_the_upstream_marks_the_backend_first(logs):
    proxy, state = make(a3_fail_threshold=1)
    state.request_num = 1
    proxy._probe_client = Client({HP: 200, HD: 500})
    round_of(proxy)
    assert logs()[-1] == ("WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: 1 consecutive failed "
                                     "/health probes (last: HTTP 500) (requests in flight: the upstream marks it and "
                                     "removes it once they are done)")
    assert [str(s) for s in state.tainted_decoders] == [D]
    Closable.closed[:] = []
    round_of(proxy, **{HD: 200})  # back while still marked: the old entry is kept, the new client closed
    asyncio.run(asyncio.sleep(0))
    assert state.tainted_decoders == [] and [str(s) for s in state.decoders] == [D]
    assert not isinstance(state.decoders[0], Closable)
    assert proxy.counters == {"a3_proxy_rotation_changes_total": 2}


def test_the_close_of_a_server_the_upstream_did_not_keep_is_scheduled():
    proxy, state = make(a3_fail_threshold=1)
    state.request_num = 1
    state.tainted_decoders.append(state.decoders[0])
    backend = proxy.backends[("decode", D)]
    Closable.closed[:] = []

    async def add():
        proxy._add(backend, "test")
        await asyncio.sleep(0)

    asyncio.run(add())
    assert Closable.closed == [D]


def test_a_failing_rotation_change_is_logged_and_the_round_goes_on(logs):
    proxy, state = make(a3_fail_threshold=1, decodes=(("10.0.0.2", 2), ("10.0.0.3", 3)))

    def broken(instances):
        raise RuntimeError("broken")

    state.remove_decoders = broken
    proxy._probe_client = Client({HP: 200, HD: 500, "http://10.0.0.3:3/health": 500})
    round_of(proxy)
    found = logs()
    assert found[1:] == [("ERROR", "decode backend 10.0.0.2:2: the upstream's remove failed"),
                         ("ERROR", "decode backend 10.0.0.3:3: the upstream's remove failed")]
    assert proxy.counters == {}


def test_a_failing_add_is_logged_too(logs):
    proxy, state = make(a3_fail_threshold=1)
    proxy._probe_client = Client({HP: 200, HD: 500})
    round_of(proxy)
    logs()

    def broken(instances):
        raise RuntimeError("broken")

    state.add_decoders = broken
    round_of(proxy, **{HD: 200})
    assert logs() == [("ERROR", "decode backend 10.0.0.2:2: the upstream's add failed")]


def test_a_backend_added_through_the_upstream_is_found_and_probed(logs):
    proxy, state = make()
    proxy._probe_client = Client({HP: 200, HD: 200, "http://10.0.0.3:3/health": 200})
    state.add_decoders([FakeServer("10.0.0.3", 3)])
    before = time.time()
    round_of(proxy)
    found = proxy.backends[("decode", "10.0.0.3:3")]
    assert found.state == "up" and found.probes == 1
    assert before <= found.last_probe_time <= time.time()
    proxy._discover()
    assert list(proxy.backends) == [("prefill", P), ("decode", D), ("decode", "10.0.0.3:3")]
    fresh, _unused = make()
    fresh.up.proxy_state.add_prefillers([FakeServer("10.0.0.4", 4)])
    fresh._discover()
    added = fresh.backends[("prefill", "10.0.0.4:4")]
    assert added.last_change_reason == "found in the upstream rotation (/instances/add)"
    assert before <= added.last_change_time <= time.time()


def test_a_round_reads_etcd_too():
    proxy = etcd_proxy()
    proxy._probe_client = Client({HP: 200, HD: 200})
    proxy._etcd_client.answers[RANGE] = etcd_answer(w1="1;ready", w2="1;ready")
    asyncio.run(proxy.probe_round())
    assert proxy.ds_workers == {"w1": 1, "w2": 1} and [b.state for b in proxy.backends.values()] == ["up", "up"]


# ----------------------------------------------------------------------------- the probe loop

class Paced(object):
    """core's asyncio with wait_for and sleep recorded."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return getattr(asyncio, name)

    async def wait_for(self, awaitable, timeout):
        self.calls.append(("wait_for", timeout))
        return await asyncio.wait_for(awaitable, timeout)

    async def sleep(self, seconds):
        self.calls.append(("sleep", seconds))
        await asyncio.sleep(seconds)


def loop_run(proxy, monkeypatch, script, rounds_wanted):
    paced = Paced()
    monkeypatch.setattr(core, "asyncio", paced)
    rounds = []

    async def probe_round():
        rounds.append(proxy._wake.is_set())
        await asyncio.sleep(0.1)
        await script(len(rounds))

    proxy.probe_round = probe_round

    async def main():
        proxy._wake = asyncio.Event()
        task = asyncio.ensure_future(proxy._probe_loop())
        for _unused in range(100):
            await asyncio.sleep(0.05)
            if len(rounds) >= rounds_wanted:
                break
        await asyncio.sleep(0.3)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return task

    task = asyncio.run(main())
    return rounds, paced.calls, task


def test_the_probe_loop_waits_out_the_interval_less_the_rounds_time(monkeypatch):
    proxy, _unused = make(a3_probe_interval=5.0)

    async def script(n):
        if n == 1:
            asyncio.get_running_loop().call_later(0.3, proxy._wake.set)  # a failed request asks for a round

    rounds, calls, task = loop_run(proxy, monkeypatch, script, 2)
    assert rounds == [False, False] and task.cancelled()
    assert [name for name, _unused in calls] == ["wait_for", "sleep", "wait_for"] and calls[1] == ("sleep", 0.2)
    assert all(4.5 < seconds <= 4.9 for name, seconds in calls if name == "wait_for")  # 5s less the round's 0.1s


def test_the_probe_loop_waits_at_least_a_fifth_of_a_second_and_goes_on_after_a_failed_round(monkeypatch, logs):
    proxy, _unused = make(a3_probe_interval=0.1)

    async def script(n):
        if n == 1:
            raise RuntimeError("boom")

    rounds, calls, task = loop_run(proxy, monkeypatch, script, 3)
    assert calls[:3] == [("wait_for", 0.2)] * 3
    assert logs()[0] == ("ERROR", "probe round failed")


def test_a_cancelled_round_ends_the_loop(monkeypatch, logs):
    proxy, _unused = make(a3_probe_interval=5.0)

    async def script(n):
        await asyncio.sleep(3600)

    rounds, calls, task = loop_run(proxy, monkeypatch, script, 1)
    assert rounds == [False] and calls == [] and task.cancelled() and logs() == []


# ----------------------------------------------------------------------------- start and stop

class Lifespan(object):
    def __init__(self, fail=False):
        self.events, self.fail = [], fail

    def __call__(self, app):
        self.events.append(("made", app))
        return self

    async def __aenter__(self):
        self.events.append("enter")

    async def __aexit__(self, *args):
        self.events.append(("exit",) + args)
        if self.fail:
            raise RuntimeError("no shutdown")


def started(monkeypatch, fail=False, **opts):
    made, contexts = [], []

    def client(**kwargs):
        made.append(Client({HP: 200, HD: 200}, **kwargs))
        return made[-1]

    monkeypatch.setattr(httpx, "AsyncClient", client)
    monkeypatch.setattr(core, "etcd_ssl_context", lambda *args: contexts.append(args) or "context")
    proxy, state = make(**opts)
    lifespan = Lifespan(fail)
    proxy.up.app = types.SimpleNamespace(router=types.SimpleNamespace(lifespan_context=lifespan))
    return proxy, state, made, contexts, lifespan


def test_start_runs_the_upstreams_lifespan_then_probes_and_stop_undoes_it(monkeypatch, logs):
    proxy, state, made, contexts, lifespan = started(monkeypatch, a3_probe_interval=5.0, a3_probe_timeout=1.5,
                                                     a3_fail_threshold=4, a3_first_byte_timeout=30.0,
                                                     a3_idle_timeout=60.0)
    state.add_decoders([FakeServer("10.0.0.3", 3)])
    original = state.select_decoder

    async def main():
        await proxy.start()
        assert lifespan.events == [("made", proxy.up.app), "enter"]
        assert ("decode", "10.0.0.3:3") in proxy.backends and state.select_decoder is not original
        assert sorted(proxy._release) == [("decode", "tokens"), ("prefill", "kv"), ("prefill", "tokens")]
        await asyncio.sleep(0.2)
        assert not proxy._prober.done() and isinstance(proxy._wake, asyncio.Event)
        await proxy.stop()
        return proxy._prober

    made_answers = {"http://10.0.0.3:3/health": 200}
    prober = asyncio.run(main())
    assert prober.cancelled()
    probe_client, api_client = made
    assert probe_client.kwargs == {"timeout": httpx.Timeout(1.5), "trust_env": False,
                                   "limits": httpx.Limits(max_keepalive_connections=0)}
    assert api_client.kwargs == {"timeout": httpx.Timeout(10.0), "trust_env": False}
    assert proxy._probe_client is probe_client and proxy._api_client is api_client
    assert proxy._etcd_client is probe_client and contexts == []
    assert [c[1] for c in probe_client.calls][:2] == [HP, HD] and made_answers
    assert (probe_client.closed, api_client.closed) == (1, 1)
    assert lifespan.events[-1] == ("exit", None, None, None)
    assert logs()[0] == ("INFO", "probing 3 backends every 5s (timeout 1.5s, 4 failures take one out of the "
                                 "rotation); first-byte timeout 30s, idle timeout 60s; etcd not read")


def test_start_with_an_https_etcd_makes_its_own_client(monkeypatch, logs):
    proxy, state, made, contexts, lifespan = started(
        monkeypatch, a3_etcd_endpoint=parse_etcd_addresses("https://etcd-1:2379"), a3_etcd_ca="ca.pem",
        a3_etcd_cert="c.pem", a3_etcd_key="k.pem", a3_probe_timeout=1.5)

    async def main():
        await proxy.start()
        await proxy.stop()

    asyncio.run(main())
    probe_client, api_client, etcd_client = made
    assert contexts == [("ca.pem", "c.pem", "k.pem")]
    assert etcd_client.kwargs == {"timeout": httpx.Timeout(1.5), "trust_env": False, "verify": "context",
                                  "limits": httpx.Limits(max_keepalive_connections=0)}
    assert proxy._etcd_client is etcd_client and etcd_client.closed == 1 and probe_client.closed == 1
    assert logs()[0][1].endswith("; etcd https://etcd-1:2379")


def test_start_with_an_http_etcd_reads_it_with_the_probe_client(monkeypatch):
    proxy, state, made, contexts, lifespan = started(monkeypatch,
                                                     a3_etcd_endpoint=parse_etcd_addresses("http://etcd-1:2379"))

    async def main():
        await proxy.start()
        await proxy.stop()

    asyncio.run(main())
    assert len(made) == 2 and proxy._etcd_client is made[0] and contexts == [] and made[0].closed == 1


def test_start_names_every_etcd_member(monkeypatch, logs):
    proxy, state, made, contexts, lifespan = started(
        monkeypatch, a3_etcd_endpoint=parse_etcd_addresses("https://e1:2379,https://e2:2379,https://e3:2379"),
        a3_etcd_ca="ca.pem")

    async def main():
        await proxy.start()
        await proxy.stop()

    asyncio.run(main())
    assert len(made) == 3 and proxy._etcd_client is made[2] and contexts == [("ca.pem", None, None)]
    assert logs()[0][1].endswith("; etcd https://e1:2379,https://e2:2379,https://e3:2379")


def test_a_failed_shutdown_of_the_upstream_is_logged(monkeypatch, logs):
    proxy, state, made, contexts, lifespan = started(monkeypatch, fail=True)

    async def main():
        await proxy.start()
        logs()
        await proxy.stop()

    asyncio.run(main())
    assert logs() == [("ERROR", "the upstream's shutdown failed")]


def test_stop_before_start_does_nothing(logs):
    proxy, _unused = make()
    asyncio.run(proxy.stop())
    assert logs() == []
    assert (proxy._prober, proxy._probe_client, proxy._api_client, proxy._etcd_client, proxy._lifespan_cm,
            proxy._wake) == (None,) * 6


def test_a_header_timeout_is_counted_and_logged(logs):
    proxy, _unused = make(a3_header_timeout=2.5)
    proxy.header_timed_out(("10.1.1.1", 5000))
    proxy.header_timed_out(None)
    assert proxy.counters == {"a3_proxy_header_timeouts_total": 2}
    assert logs() == [("WARNING", "connection from 10.1.1.1:5000 closed: its request headers did not come within "
                                  "2.5s"),
                      ("WARNING", "connection from ? closed: its request headers did not come within 2.5s")]


def test_a_round_goes_on_to_the_next_backend_after_a_change_of_the_rotation(logs):
    proxy, state = make(a3_fail_threshold=2)
    proxy._probe_client = Client({HP: 500, HD: 200})
    round_of(proxy)
    assert logs() == [("WARNING", "prefill backend 10.0.0.1:1: probe failed (1 of 2 before it leaves the rotation): "
                                  "HTTP 500"),
                      ("INFO", "decode backend 10.0.0.2:2: unknown -> up: first /health probe succeeded (HTTP 200)")]
    round_of(proxy, **{HD: 500})
    assert logs() == [("WARNING", "prefill backend 10.0.0.1:1: taken out of the rotation: 2 consecutive failed "
                                  "/health probes (last: HTTP 500)"),
                      ("WARNING", "decode backend 10.0.0.2:2: probe failed (1 of 2 before it leaves the rotation): "
                                  "HTTP 500")]
    assert state.prefillers == [] and [str(s) for s in state.decoders] == [D]
    Closable.closed[:] = []
    round_of(proxy, **{HP: 200})
    assert logs() == [("WARNING", "prefill backend 10.0.0.1:1: back in the rotation: /health answers again "
                                  "(HTTP 200)"),
                      ("WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: 2 consecutive failed "
                                  "/health probes (last: HTTP 500)")]
    assert [str(s) for s in state.prefillers] == [P] and state.decoders == []
    asyncio.run(asyncio.sleep(0))
    assert Closable.closed == [] and proxy.counters == {"a3_proxy_rotation_changes_total": 3}


def test_a_prefill_marked_while_requests_are_in_flight(logs):
    proxy, state = make(a3_fail_threshold=1)
    state.request_num = 1
    proxy._probe_client = Client({HP: 500, HD: 200})
    round_of(proxy)
    assert [str(s) for s in state.tainted_prefillers] == [P] and state.tainted_decoders == []
    assert logs()[0][1].endswith(" (requests in flight: the upstream marks it and removes it once they are done)")
