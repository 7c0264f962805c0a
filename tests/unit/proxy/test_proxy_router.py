# -*- coding: utf-8 -*-
"""a3proxy.router without a router: the msgpack bytes of a registration, what the registrar sends for up, down,
unknown and drained backends, in_rotation's grace after the last registration, the reads of the router's metrics and
of haproxy's CSV statistics (kept when good, dropped when failed), /metrics, the health decisions around the child,
the child's argv and environment, the 404 answers, and the engine's command-line checks (stand-in clients, no
socket; the process-level behaviour is in test_proxy_router_live.py)."""
from __future__ import annotations

import asyncio
import types

import httpx
import pytest
from a3proxy import auth, cli, router
from a3proxy.apps import AdminApp, PublicApp

from proxy_fakes import asgi, options
from wrapper_process import parse_metrics

P, D = "10.0.0.1:1", "10.0.0.2:2"
SECRETS = auth.Secrets((), "", "")
METRICS_URL = "http://127.0.0.1:9303/metrics"
STATS_URL = "http://127.0.0.1:8094/stats;csv"


def make(prefills=(("10.0.0.1", 1),), decodes=(("10.0.0.2", 2),), secrets=SECRETS, **opts):
    opts = dict(dict(a3_engine="vllm-router", a3_router_bin="/opt/router/bin/vllm-router", a3_router_port=9301,
                     a3_router_discovery_port=9302, a3_router_metrics_port=9303), **opts)
    args = types.SimpleNamespace(prefiller_instances=list(prefills), decoder_instances=list(decodes))
    return router.RouterCore(args, options(**opts), secrets)


class Clock(object):
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    found = Clock()
    monkeypatch.setattr(router.time, "monotonic", found)
    return found


def up(core, *keys):
    for backend in core.backends.values():
        if backend.key in keys:
            backend.observe(True, "HTTP 200", 1.0)


# ----------------------------------------------------------------------------- msgpack

@pytest.mark.parametrize("text, want", [
    ("", b"\xa0"),
    ("P", b"\xa1P"),
    ("x" * 31, b"\xbf" + b"x" * 31),
    ("x" * 32, b"\xd9\x20" + b"x" * 32),
    ("x" * 255, b"\xd9\xff" + b"x" * 255),
    ("x" * 256, b"\xda\x01\x00" + b"x" * 256),
    ("x" * 65535, b"\xda\xff\xff" + b"x" * 65535),
    ("é", b"\xa2\xc3\xa9"),  # the length is the UTF-8 bytes'
])
def test_msgpack_strings(text, want):
    assert router.msgpack_str(text) == want


def test_msgpack_refuses_what_it_does_not_write():
    with pytest.raises(ValueError, match="65536 bytes"):
        router.msgpack_str("x" * 65536)
    with pytest.raises(ValueError, match="65536 entries"):
        router.msgpack_map(dict(("k%d" % i, "") for i in range(65536)))


def test_msgpack_maps():
    assert router.msgpack_map({}) == b"\x80"
    assert router.msgpack_map({"a": "b", "c": ""}) == b"\x82\xa1a\xa1b\xa1c\xa0"
    fifteen = dict(("k%02d" % i, "v") for i in range(15))
    assert router.msgpack_map(fifteen)[:1] == b"\x8f"
    sixteen = dict(("k%02d" % i, "v") for i in range(16))
    assert router.msgpack_map(sixteen) == b"\xde\x00\x10" + b"".join(b"\xa3k%02d\xa1v" % i for i in range(16))


def test_a_registration_has_the_exact_bytes_the_router_reads():
    assert router.registration("prefill", "10.0.0.1", 8100) == (
        b"\x83\xa4type\xa1P\xachttp_address\xad10.0.0.1:8100\xabzmq_address\xad10.0.0.1:8100")
    assert router.registration("decode", "fe80::1", 5) == (
        b"\x83\xa4type\xa1D\xachttp_address\xab[fe80::1]:5\xabzmq_address\xab[fe80::1]:5")
    assert router.http_address("[fe80::1]", 5) == "[fe80::1]:5" and router.http_address("h", "7") == "h:7"


# ----------------------------------------------------------------------------- the registrar

def registrar(core):
    sent = []
    core._send = sent.append
    return sent


def test_the_registrar_sends_the_up_and_undrained_backends_only(clock):
    core = make(prefills=(("10.0.0.1", 1), ("10.0.0.3", 3)), decodes=(("10.0.0.2", 2), ("10.0.0.4", 4)))
    sent = registrar(core)
    assert core.heartbeat() == [] and sent == []  # "unknown": not probed yet, not registered
    up(core, P, D, "10.0.0.3:3", "10.0.0.4:4")
    for _unused in range(3):
        core.backends[("decode", "10.0.0.4:4")].observe(False, "HTTP 503", 2.0)
    assert core.backends[("decode", "10.0.0.4:4")].state == "down"
    core.drained.add("10.0.0.3:3")
    assert core.heartbeat() == [D, P]  # ordered by role, then backend
    assert sent == [router.registration("decode", "10.0.0.2", 2), router.registration("prefill", "10.0.0.1", 1)]
    assert sorted(core.registered) == [("decode", D), ("prefill", P)]


def test_in_rotation_holds_for_the_routers_time_after_the_last_registration(clock):
    core = make()
    registrar(core)
    up(core, P, D)
    decode = core.backends[("decode", D)]
    assert not core.in_rotation(decode)
    core.heartbeat()
    assert core.in_rotation(decode)
    core.drained.add(D)
    clock.now += 1.0
    assert core.heartbeat() == [P]
    snaps = dict((s["backend"], s) for s in core.snapshots())
    assert snaps[D]["in_rotation"] and snaps[D]["drained"] and snaps[D]["healthy"]
    clock.now += router.REGISTERED_FOR - 1.0 - 0.01
    assert core.in_rotation(decode)  # the router may still hold it: a rolling restart waits on this
    clock.now += 0.02
    assert not core.in_rotation(decode) and core.in_rotation(core.backends[("prefill", P)])  # sent 1 s later
    assert router.REGISTERED_FOR > router.ROUTER_TTL_S


def test_a_drained_backend_counts_a_request_while_the_router_may_still_choose_it(clock):
    core = make()
    registrar(core)
    up(core, P, D)
    core.heartbeat()
    prefill, decode = core.backends[("prefill", P)], core.backends[("decode", D)]
    core.active_decode = {"http://" + D: 2}
    assert (core.inflight(prefill), core.inflight(decode)) == (0, 2)   # not drained: the counts alone
    core.drained.update([P, D])
    assert (core.inflight(prefill), core.inflight(decode)) == (1, 3)   # still registered: one more each
    clock.now += router.REGISTERED_FOR + 0.01
    assert (core.inflight(prefill), core.inflight(decode)) == (0, 2)   # dropped by the router: its counts alone
    core.active_decode = {}
    assert dict((s["backend"], s["inflight_requests"]) for s in core.snapshots()) == {P: 0, D: 0}


def test_a_failed_send_is_logged_once_and_retried(clock, logs):
    core = make()
    up(core, P, D)
    failures = [RuntimeError("Resource temporarily unavailable")] * 2
    sent = []

    def send(message):
        if failures:
            raise failures.pop()
        sent.append(message)

    core._send = send
    assert core.heartbeat() == []   # the first failure is logged at once, the next ones not
    assert logs() == [("WARNING", "cannot register the backends with the router (127.0.0.1:9302): RuntimeError: "
                                  "Resource temporarily unavailable; retrying every 1s")]
    assert core.heartbeat() == [] and logs() == []
    assert core.registered == {}
    assert core.heartbeat() == [D, P] and len(sent) == 2
    assert logs() == [("WARNING", "registrations reach the router again")]
    assert core.heartbeat() == [D, P] and logs() == []


def test_a_probe_rounds_change_is_logged_and_counted(logs):
    core = make()
    backend = core.backends[("decode", D)]
    backend.observe(False, "HTTP 503", 1.0)
    core._apply(backend, "remove")
    core._apply(backend, "add")
    assert core.counters == {"a3_proxy_rotation_changes_total": 2}
    assert logs() == [("WARNING", "decode backend 10.0.0.2:2: taken out of the rotation: listed on the command line "
                                  "(no more registrations: the router drops it within 5s)"),
                      ("WARNING", "decode backend 10.0.0.2:2: back in the rotation: listed on the command line")]


# ----------------------------------------------------------------------------- the router's metrics

ROUTER_METRICS = '''# HELP vllm_router_pd_requests_total Total PD requests
# TYPE vllm_router_pd_requests_total counter
vllm_router_pd_requests_total{route="/v1/chat/completions"} 7
# TYPE vllm_router_pd_errors_total counter
vllm_router_pd_errors_total{error_type="server_selection"} 3
vllm_router_pd_errors_total{error_type="decode_request"} 2

# TYPE vllm_router_pd_active_decode_requests gauge
vllm_router_pd_active_decode_requests{worker="http://10.0.0.2:2",rank="aggregate"} 4
vllm_router_pd_active_decode_requests{worker="http://10.0.0.2:2",rank="0"} 3
vllm_router_pd_active_decode_requests{worker="http://10.0.0.2:2",rank="1"} 1
vllm_router_pd_active_decode_requests{worker="http://10.0.0.5:5",rank="0"} 2
vllm_router_pd_active_decode_requests{worker="http://10.0.0.5:5",rank="1"} 5
vllm_router_pd_active_prefill_tokens{worker="http://10.0.0.1:1",rank="aggregate"} 900
vllm_router_pd_decode_pending_seconds{quantile="0.5"} 0.00034097546561497884
'''


def test_the_routers_metrics_are_read():
    assert router.parse_router_metrics(ROUTER_METRICS) == (5.0, {"http://10.0.0.2:2": 4, "http://10.0.0.5:5": 7})
    assert router.parse_router_metrics("") == (0.0, {})  # before its first error the router writes no series


@pytest.mark.parametrize("text", ["vllm_router_pd_errors_total{error_type=x} 1", "what is this", "a{b=\"c\"} x"])
def test_an_unreadable_metrics_text(text):
    with pytest.raises(ValueError):
        router.parse_router_metrics(text)


def test_label_values_with_escapes():
    assert router.prometheus_samples('m{a="x\\"y",b="1\\\\2"} 3 1700000000') == [("m", {"a": 'x"y', "b": "1\\2"}, 3.0)]


# ----------------------------------------------------------------------------- haproxy's CSV statistics

# The header of haproxy 2.6's "show stat" CSV: the fields of the management guide's section 9.1 in their order (2.6
# adds agg_server_status and agg_check_status around the older agg_server_check_status), then after "-" the fields
# of the statistics modules (ssl, h2); the line ends with a comma, as haproxy writes it. Rows as a 2.6 edge with the
# proxies "chat" and "completions" writes them.
HEADER = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,"
          "weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,"
          "rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,"
          "hanafail,req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,"
          "last_chk,last_agt,qtime,ctime,rtime,ttime,agent_status,agent_code,agent_duration,check_desc,agent_desc,"
          "check_rise,check_fall,check_health,agent_rise,agent_fall,agent_health,addr,cookie,mode,algo,conn_rate,"
          "conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,srv_icur,src_ilim,"
          "qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,used_conn_cur,need_conn_est,"
          "uweight,agg_server_status,agg_server_check_status,agg_check_status,-,ssl_sess,ssl_reused_sess,"
          "ssl_failed_handshake,h2_headers_rcvd,h2_data_rcvd,h2_settings_rcvd,h2_rst_stream_rcvd,h2_goaway_rcvd,"
          "h2_detected_conn_protocol_errors,h2_detected_strm_protocol_errors,h2_rst_stream_resp,h2_goaway_resp,"
          "h2_open_connections,h2_backend_open_streams,h2_total_connections,h2_backend_total_streams,")
COLUMNS = HEADER[2:].split(",")


def row(pxname, svname, **values):
    cells = [""] * len(COLUMNS)
    cells[0], cells[1] = pxname, svname
    for name, value in values.items():
        cells[COLUMNS.index(name)] = str(value)
    return ",".join(cells)


STATS = "\n".join([
    HEADER,
    row("public", "FRONTEND", hrsp_2xx=99, hrsp_5xx=9, mode="http"),
    row("chat", "router", hrsp_2xx=50, hrsp_4xx=1, hrsp_5xx=2, mode="http"),  # a server row: BACKEND counts
    row("chat", "BACKEND", hrsp_1xx=0, hrsp_2xx=51, hrsp_3xx=0, hrsp_4xx=2, hrsp_5xx=3, hrsp_other=4, mode="http"),
    row("completions", "BACKEND", hrsp_1xx=0, hrsp_2xx=7, hrsp_3xx=0, hrsp_4xx=0, hrsp_5xx=1, hrsp_other=0),
    row("control", "BACKEND", hrsp_2xx=1000, hrsp_5xx=1000),
    "",
])


def test_the_edges_statistics_are_read():
    assert COLUMNS[-1] == "" and COLUMNS.index("hrsp_2xx") == 40 and COLUMNS.index("hrsp_5xx") == 43
    assert router.parse_edge_stats(STATS) == {
        ("/v1/chat/completions", "2xx"): 51, ("/v1/chat/completions", "3xx"): 0,
        ("/v1/chat/completions", "4xx"): 2, ("/v1/chat/completions", "5xx"): 3,
        ("/v1/completions", "2xx"): 7, ("/v1/completions", "3xx"): 0, ("/v1/completions", "4xx"): 0,
        ("/v1/completions", "5xx"): 1}


def test_the_first_row_after_the_header_counts():
    text = "\n".join([HEADER, row("chat", "BACKEND", hrsp_2xx=5, hrsp_3xx=0, hrsp_4xx=0, hrsp_5xx=0)])
    assert router.parse_edge_stats(text)[("/v1/chat/completions", "2xx")] == 5


@pytest.mark.parametrize("text, message", [
    ("", "no '# pxname,svname,...' header line"),
    ("pxname,svname\nchat,BACKEND", "no '# pxname,svname,...' header line"),
    ("# pxname,svname,hrsp_2xx\n", "have no column hrsp_3xx, hrsp_4xx, hrsp_5xx"),
])
def test_what_is_not_haproxys_statistics(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        router.parse_edge_stats(text)


# ----------------------------------------------------------------------------- the reads of a probe round

class Client(object):
    """An httpx.AsyncClient stand-in: answers[url] is (status, text) or an exception."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    async def get(self, url, **kwargs):
        self.calls.append(url)
        answer = self.answers[url]
        if isinstance(answer, BaseException):
            raise answer
        return httpx.Response(answer[0], text=answer[1], request=httpx.Request("GET", url))


def read(core, answers):
    core._probe_client = Client(answers)

    async def both():
        await core.read_router_metrics()
        await core.read_edge_stats()

    asyncio.run(both())
    return core._probe_client.calls


def test_the_reads_keep_the_last_good_answer_and_a_failed_read_drops_it(logs):
    core = make(a3_edge_stats=STATS_URL)
    before = (core.router_errors, core.edge_requests, core.router_read_ok, core.edge_read_ok)
    assert before == (None, None, False, False)
    assert read(core, {METRICS_URL: (200, ROUTER_METRICS), STATS_URL: (200, STATS)}) == [METRICS_URL, STATS_URL]
    assert core.router_errors == 5.0 and core.active_decode["http://10.0.0.2:2"] == 4
    assert core.edge_requests[("/v1/chat/completions", "5xx")] == 3 and core.edge_read_ok and core.router_read_ok
    assert logs() == []
    snaps = dict((s["backend"], s) for s in core.snapshots())
    assert (snaps[D]["inflight_requests"], snaps[P]["inflight_requests"]) == (4, 0)  # a prefill's: always 0
    read(core, {METRICS_URL: (500, "no"), STATS_URL: httpx.ConnectError("refused")})
    assert (core.router_errors, core.active_decode, core.router_read_ok) == (None, {}, False)
    assert (core.edge_requests, core.edge_read_ok) == (None, False)
    assert logs() == [
        ("WARNING", "cannot read the router's metrics (http://127.0.0.1:9303/metrics): HTTPStatusError: Server error "
                    "'500 Internal Server Error' for url 'http://127.0.0.1:9303/metrics'"),
        ("WARNING", "cannot read the edge's statistics (http://127.0.0.1:8094/stats;csv): ConnectError: refused")]
    read(core, {METRICS_URL: (200, "garbage here"), STATS_URL: (200, "not csv")})
    assert logs() == []  # logged once while the reads keep failing


def test_without_edge_statistics_only_the_router_is_read():
    core = make()
    assert read(core, {METRICS_URL: (200, "")}) == [METRICS_URL]
    assert core.edge_read_ok is None and core.router_errors == 0.0


ENGINE_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="glm-5.1"} 2.0
vllm:num_requests_running{engine="1",model_name="glm-5.1"} 1.0
vllm:num_requests_waiting{engine="0",model_name="glm-5.1"} 7.0
"""


def test_engine_running_sums_the_engines_running_requests():
    assert router.engine_running(ENGINE_METRICS) == 3
    with pytest.raises(ValueError, match="no vllm:num_requests_running"):
        router.engine_running("vllm:num_requests_waiting 1\n")


def test_a_prefills_open_requests_are_the_engines_own_count(logs):
    core = make(prefills=(("10.0.0.1", 1), ("10.0.0.3", 3)))
    prefill, other = core.backends[("prefill", P)], core.backends[("prefill", "10.0.0.3:3")]
    urls = ("http://10.0.0.1:1/metrics", "http://10.0.0.3:3/metrics")
    core._probe_client = Client({urls[0]: (200, ENGINE_METRICS), urls[1]: (200, "vllm:num_requests_running 0\n")})
    asyncio.run(core.read_prefill_running())
    assert sorted(core._probe_client.calls) == sorted(urls)   # prefills only, never a decode
    assert (core.inflight(prefill), core.inflight(other)) == (3, 0)
    # a failed read drops the count, logged once until a read succeeds again
    core._probe_client = Client({urls[0]: httpx.ConnectError("refused"), urls[1]: (500, "")})
    asyncio.run(core.read_prefill_running())
    asyncio.run(core.read_prefill_running())
    assert (core.inflight(prefill), core.inflight(other)) == (0, 0)
    warned = [m for level, m in logs() if level == "WARNING"]
    assert len(warned) == 2 and "prefill backend 10.0.0.1:1: cannot read its open requests" in warned[0], warned
    core._probe_client = Client({urls[0]: (200, ENGINE_METRICS), urls[1]: (200, ENGINE_METRICS)})
    asyncio.run(core.read_prefill_running())
    assert (core.inflight(prefill), core.inflight(other)) == (3, 3) and logs() == []
    # drained and still registered: one more, as for a decode
    core.drained.add(P)
    core.registered[("prefill", P)] = router.time.monotonic()
    assert core.inflight(prefill) == 4


def test_the_side_reads_of_a_round():
    core = make()
    reads = core.side_reads()
    names = [r.__qualname__ for r in reads]
    for coro in reads:
        coro.close()
    assert names == ["ProbingCore.read_ds_workers", "RouterCore.read_router_metrics", "RouterCore.read_edge_stats",
                     "RouterCore.read_prefill_running"]


# ----------------------------------------------------------------------------- /metrics

class Child(object):
    def __init__(self, code=None):
        self.code, self.pid = code, 4242

    def poll(self):
        return self.code

    @property
    def returncode(self):
        return self.code


def test_metrics_of_the_router_engine(clock):
    core = make(a3_edge_stats=STATS_URL)
    registrar(core)
    up(core, P, D)
    core.heartbeat()
    core.count_request("/v1/models", 200)
    core.count("a3_proxy_upstream_errors_total")  # a /v1/models that no backend answered
    core._probe_client = Client({METRICS_URL: (200, ROUTER_METRICS), STATS_URL: (200, STATS)})
    read(core, core._probe_client.answers)
    core.child, core.router_ready = Child(), True
    text = core.metrics_text()
    found = parse_metrics(text)
    assert found['a3_proxy_requests_total{endpoint="/v1/chat/completions",code="5xx"}'] == 3
    assert found['a3_proxy_requests_total{endpoint="/v1/completions",code="2xx"}'] == 7
    assert found['a3_proxy_requests_total{endpoint="/v1/models",code="200"}'] == 1
    assert found["a3_proxy_upstream_errors_total"] == 6  # the router's 5 and the wrapper's own 1
    assert found['a3_proxy_engine_info{engine="vllm-router"}'] == 1
    assert found["a3_proxy_router_up"] == 1 and found["a3_proxy_router_metrics_read_ok"] == 1
    assert found["a3_proxy_edge_stats_read_ok"] == 1
    assert found['a3_proxy_backend_inflight_requests{role="decode",backend="10.0.0.2:2"}'] == 4
    assert found['a3_proxy_backend_up{role="decode",backend="10.0.0.2:2"}'] == 1
    core.ds_workers = {"10.0.0.1:18481": 1, "10.0.0.2:18481": 0}   # etcd's registrations, read as with upstream
    found = parse_metrics(core.metrics_text())
    assert found['a3_proxy_ds_worker_registered{worker="10.0.0.2:18481"}'] == 0
    assert found['a3_proxy_ds_worker_registered{worker="10.0.0.1:18481"}'] == 1
    core.child = Child(1)
    read(core, {METRICS_URL: httpx.ConnectError("refused"), STATS_URL: (503, "")})
    found = parse_metrics(core.metrics_text())
    assert "a3_proxy_upstream_errors_total" not in found and found["a3_proxy_router_up"] == 0
    assert not [s for s in found if s.startswith("a3_proxy_requests_total") and "completions" in s]
    assert (found["a3_proxy_router_metrics_read_ok"], found["a3_proxy_edge_stats_read_ok"]) == (0, 0)


def test_metrics_without_edge_statistics_leave_their_gauge_out():
    found = parse_metrics(make().metrics_text())
    assert "a3_proxy_edge_stats_read_ok" not in found and found["a3_proxy_router_up"] == 0


# ----------------------------------------------------------------------------- health around the child

def test_health_waits_for_the_router(clock):
    core = make()
    registrar(core)
    up(core, P, D)
    core.heartbeat()
    status, body = core.full_health()
    assert status == 503 and body["missing"] == ["router"] and body["message"] == "the router is not started"
    assert body["healthy_decode"] == 1
    core.child = Child()
    assert core.full_health()[1]["message"] == "the router does not accept connections on 127.0.0.1:9301 yet"
    assert core.public_health() == (503, {"status": "unavailable", "missing": ["router"],
                                          "message": "the proxy's router is not running yet; retry later"})
    core.router_ready = True
    assert core.public_health() == (200, {"status": "ok"}) and core.full_health()[0] == 200
    core.drained.add(D)
    assert core.public_health() == (503, {"status": "unavailable", "missing": ["decode"],
                                          "message": "no healthy decode backend in rotation; retry later"})
    core.child = Child(-9)
    status, body = core.full_health()
    assert status == 503 and body["missing"] == ["router", "decode"]
    assert body["message"].startswith("the router exited (status -9); no healthy decode backend in rotation (")
    assert core.public_health()[1]["message"] == ("the proxy's router is not running yet; no healthy decode backend in "
                                                  "rotation; retry later")


def test_check_router_needs_a_running_child_and_an_open_port(logs):
    core = make(a3_router_port=9)
    assert asyncio.run(core.check_router()) is False  # no child
    core.child = Child()

    async def listening():
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        core.opt.a3_router_port = server.sockets[0].getsockname()[1]
        try:
            return await core.check_router()
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(listening()) is True and core.router_ready
    assert logs() == [("INFO", "the router accepts connections on 127.0.0.1:%d" % core.opt.a3_router_port)]
    core.child = Child(0)
    assert asyncio.run(core.check_router()) is False and not core.router_ready


# ----------------------------------------------------------------------------- the child's command line

def test_the_childs_argv_and_environment():
    opt = options(a3_router_bin="/r/vllm-router", a3_router_port=1, a3_router_discovery_port=2,
                  a3_router_metrics_port=3, a3_router_arg=["--policy", "cache_aware"])
    assert router.router_argv(opt) == [
        "/r/vllm-router", "--vllm-pd-disaggregation", "--vllm-discovery-address", "127.0.0.1:2", "--host",
        "127.0.0.1", "--port", "1", "--prometheus-host", "127.0.0.1", "--prometheus-port", "3", "--policy",
        "cache_aware"]
    base = {"PATH": "/bin", "OPENAI_API_KEY": "inherited"}
    assert router.router_env(base, "engine-key") == {"PATH": "/bin", "OPENAI_API_KEY": "engine-key"}
    assert router.router_env(base, "") == {"PATH": "/bin"}
    assert base == {"PATH": "/bin", "OPENAI_API_KEY": "inherited"}  # ours is left as it was


# ----------------------------------------------------------------------------- what the listeners answer

def test_completions_and_instances_get_404():
    core = make()
    status, _h, body, _m = asgi(PublicApp(core, core.opt), "POST", "/v1/chat/completions", b"{}")
    assert status == 404 and b"served by the proxy's edge" in body
    status, _h, body, _m = asgi(AdminApp(core, core.opt), "POST", "/instances/add", b"{}")
    assert status == 404 and b"/instances/add is not available with the vllm-router engine" in body
    assert core.counters["a3_proxy_not_found_total"] == 2
    status, _h, body, _m = asgi(AdminApp(core, core.opt), "POST", "/a3/drain", b'{"backends": ["10.0.0.2:2"]}')
    assert status == 200 and core.drained == {D}


# ----------------------------------------------------------------------------- the command line

BASE = ["--a3-engine", "vllm-router", "--a3-router-bin", "/r", "--a3-router-port", "9001",
        "--a3-router-discovery-port", "9002", "--a3-router-metrics-port", "9003"]


@pytest.mark.parametrize("argv, message", [
    (BASE[:2], "--a3-engine vllm-router needs --a3-router-bin, --a3-router-port, --a3-router-discovery-port, "
               "--a3-router-metrics-port"),
    (BASE[:4] + BASE[6:], "--a3-engine vllm-router needs --a3-router-port"),
    (BASE[:-1] + ["9001"], "--a3-router-port and --a3-router-metrics-port are both 9001: the router's ports and the "
                           "admin listener's must differ"),
    (BASE + ["--a3-admin-port", "9002"], "--a3-router-discovery-port and --a3-admin-port are both 9002: the "
                                         "router's ports and the admin listener's must differ"),
    (BASE + ["--a3-edge-stats", "127.0.0.1:8094/stats;csv"],
     "--a3-edge-stats must be an http:// or https:// URL, got 127.0.0.1:8094/stats;csv"),
    (["--a3-engine", "nginx"], "argument --a3-engine: invalid choice: 'nginx' (choose from 'upstream', "
                               "'vllm-router')"),
])
def test_the_engines_usage_errors(argv, message):
    with pytest.raises(cli.UsageError) as err:
        cli.split_argv(argv)
    assert str(err.value) == message


def test_the_engines_options_are_read():
    ours, rest = cli.split_argv(BASE + ["--a3-router-arg=--policy", "--a3-router-arg", "x", "--a3-edge-stats",
                                        STATS_URL, "--port", "8000"])
    assert (ours.a3_engine, ours.a3_router_bin, ours.a3_router_port, ours.a3_router_discovery_port,
            ours.a3_router_metrics_port) == ("vllm-router", "/r", 9001, 9002, 9003)
    assert ours.a3_router_arg == ["--policy", "x"] and ours.a3_edge_stats == STATS_URL and rest == ["--port", "8000"]
    assert cli.split_argv([])[0].a3_engine == "upstream"
    # the upstream engine does not read them: the same ports are not a problem there
    assert cli.split_argv(["--a3-router-port", "8089"])[0].a3_router_port == 8089
    assert cli.router_port_conflict(ours, "9003") == (
        "--a3-router-metrics-port 9003 is the public listener's port (--port 9003): the router's ports and the "
        "listeners' must differ")
    assert cli.router_port_conflict(ours, 8000) is None
    assert cli.router_port_conflict(cli.split_argv(["--a3-router-port", "8000"])[0], 8000) is None


# ----------------------------------------------------------------------------- stopping the child

GRACEFUL_CHILD = """import signal, sys, time
def bye(*_unused):
    time.sleep(0.3)   # a router finishing what it relays
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_stop_gives_the_router_its_grace_after_sigterm(logs):
    import subprocess
    import sys
    core = make()
    core.child = subprocess.Popen([sys.executable, "-c", GRACEFUL_CHILD], stdout=subprocess.PIPE, text=True)
    assert core.child.stdout.readline().strip() == "ready"
    asyncio.run(core.stop())
    assert core.child.returncode == 0   # it ended by itself within the grace, not by SIGKILL (-9)
    assert ("INFO", "the router stopped (status 0)") in logs()
