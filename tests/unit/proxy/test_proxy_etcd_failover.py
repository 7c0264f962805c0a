# -*- coding: utf-8 -*-
"""a3proxy.core's etcd read over real sockets, with --a3-etcd naming an etcd cluster's members: a member that
refuses the connection (a closed port on 127.0.0.1) is passed over within the same read, the member that answered
is asked first the next time, and when none answers the read fails once, with one warning. The members that
answer are small HTTP servers in this process (127.0.0.1, port 0) answering etcd's POST /v3/kv/range as its JSON
gateway does; the client is a real httpx.AsyncClient as the wrapper makes it for http. Nothing outside
127.0.0.1 is contacted."""
from __future__ import annotations

import asyncio
import base64
import json
import socket

import httpx
from a3proxy import auth, core
from a3proxy.etcd import ds_range_request, parse_etcd_addresses

from proxy_fakes import fake_upstream, options

LOCAL = "127.0.0.1"


def closed_port():
    """A port on 127.0.0.1 nothing listens on (connecting is refused)."""
    with socket.socket() as sock:
        sock.bind((LOCAL, 0))
        return sock.getsockname()[1]


class Member(object):
    """An etcd member's JSON gateway for /v3/kv/range: every worker of workers registered and ready. Keeps the
    bodies it was sent; stop() closes its port."""

    def __init__(self, workers):
        self.workers = workers
        self.bodies = []
        self.server = None
        self.port = None

    async def start(self):
        self.server = await asyncio.start_server(self._serve, LOCAL, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        body = await reader.readexactly(length)
        self.bodies.append((lines[0], json.loads(body)))
        kvs = [{"key": base64.b64encode(("/datasystem/cluster/" + w).encode()).decode(),
                "value": base64.b64encode(b"1700000000;ready").decode()} for w in self.workers]
        answer = json.dumps({"header": {}, "kvs": kvs}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(answer), answer))
        await writer.drain()
        writer.close()


def cluster_proxy(ports):
    up = fake_upstream(((LOCAL, closed_port()),), ((LOCAL, closed_port()),))
    address = ",".join("%s:%d" % (LOCAL, port) for port in ports)
    proxy = core.HonestProxy(up, options(a3_etcd_endpoint=parse_etcd_addresses(address), a3_ds_worker=["w1", "w2"],
                                         a3_probe_timeout=2.0), auth.Secrets((), "", ""))
    return proxy


def test_a_refused_member_is_passed_over_and_the_one_that_answered_is_asked_first(logs):
    async def main():
        first, second = await Member(["w1"]).start(), await Member(["w1", "w2"]).start()
        refused = closed_port()
        proxy = cluster_proxy([refused, first.port, second.port])
        proxy._etcd_client = httpx.AsyncClient(timeout=httpx.Timeout(2.0), trust_env=False,
                                               limits=httpx.Limits(max_keepalive_connections=0))
        try:
            await proxy.read_ds_workers()   # the closed port refuses: the first member answers in the same read
            one = (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good, len(first.bodies), len(second.bodies))
            await proxy.read_ds_workers()   # the first member is asked first: it alone
            two = (proxy.etcd_last_good, len(first.bodies), len(second.bodies))
            await first.stop()              # now it refuses too: the closed port, then the second member
            await proxy.read_ds_workers()
            three = (proxy.etcd_ok, proxy.ds_workers, proxy.etcd_last_good, len(first.bodies), len(second.bodies))
        finally:
            await proxy._etcd_client.aclose()
            await second.stop()
        return refused, first, second, one, two, three

    refused, first, second, one, two, three = asyncio.run(main())
    assert one == (True, {"w1": 1, "w2": 0}, 1, 1, 0)
    assert two == (1, 2, 0)
    assert three == (True, {"w1": 1, "w2": 1}, 2, 2, 1)
    assert first.bodies[0] == ("POST /v3/kv/range HTTP/1.1", ds_range_request()) and second.bodies == [
        ("POST /v3/kv/range HTTP/1.1", ds_range_request())]
    messages = logs()
    assert messages[0] == ("INFO", "etcd http://127.0.0.1:%d answered the read after http://127.0.0.1:%d failed: "
                                   "ConnectError: All connection attempts failed" % (first.port, refused))
    assert ("INFO", "etcd http://127.0.0.1:%d answered the read after http://127.0.0.1:%d,http://127.0.0.1:%d "
                    "failed: http://127.0.0.1:%d: ConnectError: All connection attempts failed; http://127.0.0.1:%d: "
                    "ConnectError: All connection attempts failed"
            % (second.port, first.port, refused, first.port, refused)) in messages
    assert not [m for m in messages if m[0] != "INFO" and "etcd http" in m[1]]


def test_no_member_answering_drops_the_states_with_one_warning(logs):
    ports = [closed_port(), closed_port()]

    async def main():
        member = await Member(["w1", "w2"]).start()
        proxy = cluster_proxy(ports + [member.port])
        proxy._etcd_client = httpx.AsyncClient(timeout=httpx.Timeout(2.0), trust_env=False,
                                               limits=httpx.Limits(max_keepalive_connections=0))
        seen = []
        try:
            await proxy.read_ds_workers()
            seen.append((proxy.etcd_ok, proxy.ds_workers))
            await member.stop()
            logs()
            for _unused in range(2):
                await proxy.read_ds_workers()
                seen.append((proxy.etcd_ok, proxy.ds_workers))
        finally:
            await proxy._etcd_client.aclose()
        return member, seen

    member, seen = asyncio.run(main())
    assert seen == [(True, {"w1": 1, "w2": 1}), (False, None), (False, None)]
    urls = ["http://127.0.0.1:%d" % port for port in [member.port] + ports]
    assert logs() == [("WARNING", "etcd %s: cannot read the datasystem workers' registrations: %s" % (
        ",".join(urls), "; ".join("%s: ConnectError: All connection attempts failed" % url for url in urls)))]
