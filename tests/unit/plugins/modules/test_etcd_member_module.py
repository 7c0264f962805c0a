# -*- coding: utf-8 -*-
"""The module ascend.vllm_pd.etcd_member: main() run with its arguments as Ansible passes them, against a small fake
of etcd's JSON gRPC gateway on 127.0.0.1 (member list, add, remove, as etcd v3.5 answers them: IDs as strings, empty
fields left out, errors as {"error", "code", "message"}) and a fake of etcd's peer port on a port of its own (GET
/members, the JSON of etcd's membership: IDs as numbers, empty name and client URLs left out), which a member waiting
for its quorum serves while its client port is closed or silent; and its documentation against its argument spec."""
from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _etcd_member
from ansible_collections.ascend.vllm_pd.plugins.modules import etcd_member

ME = "etcd-2"
MY_PEERS = ["http://127.30.0.12:2380"]
ID1, ID2, ID3 = "10501334649042878790", "9372538179322589801", "1545282837162315263"
NEW_ID = "17237436991929493444"
NO_LEADER = {"error": "etcdserver: no leader", "code": 14, "message": "etcdserver: no leader"}


def started(mid, name, peer):
    return {"ID": mid, "name": name, "peerURLs": [peer], "clientURLs": [peer.replace(":2380", ":2379")]}


class FakeEtcd(object):
    """The cluster behind the fake gateway: its members as the gateway writes them, every request it got, and how it
    fails (no_leader: every request 503; hang: a linearizable list answers after ``hang`` seconds, the rest at once,
    like a ready member without quorum; add_fails: the addition 503)."""

    def __init__(self, members, no_leader=False, hang=0.0, add_fails=False):
        self.members, self.calls = [dict(m) for m in members], []
        self.no_leader, self.hang, self.add_fails = no_leader, hang, add_fails

    def answer(self, path, body):
        self.calls.append((path, body))
        if self.no_leader:
            return 503, NO_LEADER
        if path == "/v3/cluster/member/list":
            if self.hang and body.get("linearizable"):
                time.sleep(self.hang)
            return 200, {"header": {"cluster_id": "1"}, "members": self.members}
        if path == "/v3/cluster/member/remove":
            kept = [m for m in self.members if m["ID"] != body.get("ID")]
            if len(kept) == len(self.members):
                return 404, {"error": "etcdserver: member not found", "code": 5,
                             "message": "etcdserver: member not found"}
            self.members = kept
            return 200, {"header": {}, "members": self.members}
        if path == "/v3/cluster/member/add":
            if self.add_fails:
                return 503, {"error": "etcdserver: unhealthy cluster", "code": 14,
                             "message": "etcdserver: unhealthy cluster"}
            if any(set(m["peerURLs"]) & set(body["peerURLs"]) for m in self.members):
                return 400, {"error": "etcdserver: Peer URLs already exists", "code": 9,
                             "message": "etcdserver: Peer URLs already exists"}
            added = {"ID": NEW_ID, "peerURLs": body["peerURLs"]}  # no name, no client URLs until it starts
            self.members.append(added)
            return 200, {"header": {}, "member": added, "members": self.members}
        return 404, "Not Found"


def _serve(handler):
    """An http.server on 127.0.0.1 with ``handler`` in a thread: (its URL, a function that stops it)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def stop():
        srv.shutdown()
        srv.server_close()
    return "http://127.0.0.1:%d" % srv.server_address[1], stop


def _started(serve_fn):
    """A fixture's body: yields start(thing) -> URL of serve_fn(thing); stops every server started afterwards."""
    stops = []

    def start(thing):
        url, stop = serve_fn(thing)
        stops.append(stop)
        return url
    yield start
    for stop in stops:
        stop()


def serve(cluster):
    """The fake gateway of ``cluster`` on 127.0.0.1: (its URL, a function that stops it)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            code, out = cluster.answer(self.path, body)
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return _serve(Handler)


@pytest.fixture
def gateway():
    """``gateway(FakeEtcd(...))`` -> the URL of its fake gateway (stopped after the test)."""
    yield from _started(serve)


class FakePeer(object):
    """An etcd member's peer port: GET /members gives ``members`` (as etcd writes its membership); every request it
    got is recorded as (method, path)."""

    def __init__(self, members):
        self.members, self.calls = members, []


def serve_peer(peer):
    """The fake peer port of ``peer`` on 127.0.0.1: (its URL, a function that stops it)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, code, data, kind="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("X-Etcd-Cluster-ID", "cdf818194e3a8c32")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's name)
            peer.calls.append(("GET", self.path))
            if self.path == "/members":
                self.answer(200, (json.dumps(peer.members) + "\n").encode())
            else:
                self.answer(404, b"404 page not found\n", "text/plain; charset=utf-8")

        def do_POST(self):  # noqa: N802 (http.server's name)
            peer.calls.append(("POST", self.path))
            self.answer(405, b"Method Not Allowed", "text/plain; charset=utf-8")

        def log_message(self, *args):
            pass

    return _serve(Handler)


@pytest.fixture
def peer_port():
    """``peer_port(FakePeer(...))`` -> the URL of its fake peer port (stopped after the test)."""
    yield from _started(serve_peer)


@pytest.fixture
def requests_made(monkeypatch):
    """Every request the module makes, as (method, endpoint, path), in order (made all the same)."""
    made = []

    def recording(endpoint, method, path, payload, timeout, context=None):
        made.append((method, endpoint, path))
        return _etcd_member.request(endpoint, method, path, payload, timeout, context=context)
    monkeypatch.setattr(etcd_member, "request", recording)
    return made


def peer_member(mid, peer, name="", client=None):
    """A member as etcd's peer port writes it: the ID a number, name and client URLs left out while empty."""
    out = {"id": int(mid), "peerURLs": [peer]}
    if name:
        out["name"] = name
    if client:
        out["clientURLs"] = [client]
    return out


P0 = peer_member(ID1, "http://127.30.0.11:2380", "etcd-1", "http://127.30.0.11:2379")


def closed_port_url():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return "http://127.0.0.1:%d" % port


@pytest.fixture
def not_ready():
    """The client port of an etcd that is not ready: it accepts connections and answers nothing."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield "http://127.0.0.1:%d" % sock.getsockname()[1]
    sock.close()


@pytest.fixture
def run(run_main, tmp_path):
    """``run(endpoints, check_mode=False, **more)`` -> (the JSON main() printed, its exit status); this host's data
    directory is an empty tmp_path/data."""
    def call(endpoints, check_mode=False, **more):
        args = dict(name=ME, peer_urls=MY_PEERS, endpoints=endpoints, data_dir=str(tmp_path / "data"), timeout=2)
        args.update(more)
        return run_main(etcd_member.main, args, check_mode=check_mode)
    return call


LIST = ("/v3/cluster/member/list", {"linearizable": True})


def test_first_formation_nobody_serves_so_new(run, not_ready):
    refused = closed_port_url()
    result, status = run([refused, not_ready], timeout=0.3)
    assert status == 0, result
    assert result["initial_cluster_state"] == "new" and result["changed"] is False
    assert result["actions"] == [] and result["members"] == [] and result["answered_by"] is None
    assert result["asked"] == [
        refused + ": no connection: Connection refused",
        not_ready + ": accepts connections but answers nothing (no answer within 0.3 s): not ready, waiting for its "
                    "cluster to form"]


def test_rejoin_after_data_loss_removes_the_old_entry_and_adds_this_member(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380"), started(ID2, ME, MY_PEERS[0]),
                        started(ID3, "etcd-3", "http://127.30.0.13:2380")])
    refused, url = closed_port_url(), gateway(cluster)
    result, status = run([refused, url])
    assert status == 0, result
    assert result["initial_cluster_state"] == "existing" and result["changed"] is True
    assert result["actions"] == ["removed member etcd-2 (%s)" % ID2, "added http://127.30.0.12:2380"]
    assert result["answered_by"] == url
    assert result["members"] == [{"name": "etcd-1", "peer_urls": ["http://127.30.0.11:2380"]},
                                 {"name": "etcd-2", "peer_urls": MY_PEERS},
                                 {"name": "etcd-3", "peer_urls": ["http://127.30.0.13:2380"]}]
    assert cluster.calls == [LIST, ("/v3/cluster/member/remove", {"ID": ID2}),
                             ("/v3/cluster/member/add", {"peerURLs": MY_PEERS})]
    assert [m["ID"] for m in cluster.members] == [ID1, ID3, NEW_ID]
    # the next run (etcd has not started yet here): this member waits in the list, nothing more to do
    again, status = run([refused, url])
    assert status == 0 and again["changed"] is False and again["actions"] == []
    assert again["initial_cluster_state"] == "existing"
    assert again["members"][2] == {"name": "", "peer_urls": MY_PEERS}
    assert cluster.calls[3:] == [LIST]


def test_rejoin_in_check_mode_reports_and_changes_nothing(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380"), started(ID2, ME, MY_PEERS[0])])
    result, status = run([gateway(cluster)], check_mode=True)
    assert status == 0 and result["changed"] is True and result["initial_cluster_state"] == "existing"
    assert result["actions"] == ["removed member etcd-2 (%s)" % ID2, "added http://127.30.0.12:2380"]
    assert result["msg"].startswith("check mode, nothing changed")
    assert cluster.calls == [LIST] and [m["ID"] for m in cluster.members] == [ID1, ID2]


def test_already_added_not_started_joins_without_a_change(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380"), {"ID": ID2, "peerURLs": MY_PEERS}])
    result, status = run([gateway(cluster)])
    assert status == 0 and result["changed"] is False and result["actions"] == []
    assert result["initial_cluster_state"] == "existing"
    assert cluster.calls == [LIST]


def test_not_in_the_cluster_is_added(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")])
    result, status = run([gateway(cluster)])
    assert status == 0 and result["changed"] is True and result["actions"] == ["added http://127.30.0.12:2380"]
    assert cluster.calls == [LIST, ("/v3/cluster/member/add", {"peerURLs": MY_PEERS})]


def test_no_quorum_fails_naming_the_endpoints_and_changes_nothing(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380"), started(ID2, ME, MY_PEERS[0])],
                       no_leader=True)
    refused, url = closed_port_url(), gateway(cluster)
    result, status = run([refused, url])
    assert status == 1 and result["failed"] is True and "initial_cluster_state" not in result
    assert result["msg"] == (
        "the etcd cluster exists but cannot list or change its membership now (%s: no connection: Connection "
        "refused; %s: HTTP 503: etcdserver: no leader). Bring a majority of the etcd members back up (the cluster "
        "needs a leader to change its membership), then rerun." % (refused, url))
    assert result["changed"] is False and result["actions"] == [] and result["answered_by"] is None
    assert cluster.calls == [LIST]


def test_a_member_holding_its_linearizable_list_past_the_timeout_fails_as_no_quorum(run, gateway):
    """A ready etcd without a leader answers a linearizable read only after its request timeout (7 s by default),
    but its own list at once: the cluster exists, the run fails instead of starting a new one."""
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")], hang=1.5)
    url = gateway(cluster)
    result, status = run([url], timeout=0.4)
    assert status == 1 and result["failed"] is True
    assert ("%s: gave no linearizable member list (no answer within 0.4 s) but its own list at once: it runs without "
            "a leader or quorum" % url) in result["msg"]
    assert cluster.calls == [LIST, ("/v3/cluster/member/list", {"linearizable": False})]


def test_a_failed_addition_after_the_removal_fails_saying_what_was_done(run, gateway):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380"), started(ID2, ME, MY_PEERS[0])],
                       add_fails=True)
    url = gateway(cluster)
    result, status = run([url])
    assert status == 1 and result["changed"] is True
    assert result["actions"] == ["removed member etcd-2 (%s)" % ID2]
    assert result["msg"] == (
        "adding http://127.30.0.12:2380 through %s failed: HTTP 503: etcdserver: unhealthy cluster. Done before: "
        "removed member etcd-2 (%s). A rerun starts from the member list as it is then." % (url, ID2))
    # the rerun, once the cluster accepts it, only adds
    cluster.add_fails = False
    again, status = run([url])
    assert status == 0 and again["actions"] == ["added http://127.30.0.12:2380"]


def test_member_data_here_asks_nobody(run, gateway, tmp_path):
    (tmp_path / "data" / "member").mkdir(parents=True)
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")])
    result, status = run([gateway(cluster)])
    assert status == 0 and result["initial_cluster_state"] == "existing" and result["changed"] is False
    assert result["asked"] == [] and cluster.calls == []


def test_a_cluster_of_one_is_new(run):
    result, status = run([])
    assert status == 0 and result["initial_cluster_state"] == "new" and result["changed"] is False


def test_urls_that_are_not_http_fail_before_anything_is_asked(run):
    result, status = run(["127.30.0.11:2379"], peer_urls=["http://127.30.0.12:2380"])
    assert status == 1 and result["msg"] == (
        "peer_urls must name at least one URL, and every URL must be http(s)://host:port: 127.30.0.11:2379: not an "
        "http:// or https:// URL with a host")
    result, status = run([], peer_urls=[])
    assert status == 1 and result["msg"].endswith(": peer_urls is empty")


def test_missing_tls_files_fail_clearly(run, tmp_path):
    result, status = run(["https://127.30.0.11:2379"], ca=str(tmp_path / "ca.crt"))
    assert status == 1 and result["msg"].startswith("cannot load the TLS files (ca %s" % (tmp_path / "ca.crt"))


def test_documentation_matches_the_argument_spec(module_spec, docs_match_spec):
    docs, spec, kwargs = module_spec("etcd_member")
    docs_match_spec(docs, spec)
    assert docs["DOCUMENTATION"]["version_added"] == "1.1.0"
    assert kwargs["supports_check_mode"] is True and kwargs["required_together"] == [("cert", "key")]
    assert spec["peer_endpoints"] == {"type": "list", "elements": "str", "default": []}
    assert spec["formed"] == {"type": "bool"}
    for task in docs["EXAMPLES"]:
        assert set(task["ascend.vllm_pd.etcd_member"]) <= set(spec), task
    assert set(docs["RETURN"]) == {"initial_cluster_state", "actions", "members", "answered_by", "asked"}


# --- nobody serves a client endpoint: the peer ports (the case seen live) ------------------------------------------


@pytest.mark.parametrize("formed", [True, None])
def test_added_never_started_listed_by_a_waiting_peer_is_existing(run, peer_port, requests_made, formed):
    """etcd-1 has data and waits for its quorum: its client port is closed, its peer port lists this member (added
    through it, never started). This member starts "existing", changing nothing."""
    peer = FakePeer([P0, peer_member(NEW_ID, MY_PEERS[0])])
    client, peer_url = closed_port_url(), peer_port(peer)
    more = {} if formed is None else {"formed": formed}
    result, status = run([client], peer_endpoints=[peer_url], **more)
    assert status == 0, result
    assert result["initial_cluster_state"] == "existing" and result["changed"] is False and result["actions"] == []
    assert result["answered_by"] == peer_url
    assert result["members"] == [{"name": "etcd-1", "peer_urls": ["http://127.30.0.11:2380"]},
                                 {"name": "", "peer_urls": MY_PEERS}]
    assert result["asked"] == [client + ": no connection: Connection refused", peer_url + ": 2 members"]
    assert "the peer %s lists member (unnamed, never started) (%s)" % (peer_url, NEW_ID) in result["msg"]
    assert requests_made == [("POST", client, LIST[0]), ("GET", peer_url, "/members")]
    assert peer.calls == [("GET", "/members")]


def test_a_silent_client_port_and_a_peer_list_is_existing(run, peer_port, not_ready):
    """As seen live: the waiting member's client port accepts connections and answers nothing."""
    peer = FakePeer([P0, peer_member(NEW_ID, MY_PEERS[0])])
    peer_url = peer_port(peer)
    result, status = run([not_ready], peer_endpoints=[peer_url], formed=True, timeout=0.3)
    assert status == 0 and result["initial_cluster_state"] == "existing", result
    assert result["asked"][1:] == [peer_url + ": 2 members"] and peer.calls == [("GET", "/members")]


def test_listed_by_a_peer_as_started_before_fails(run, peer_port, requests_made):
    peer = FakePeer([P0, peer_member(ID2, MY_PEERS[0], ME, "http://127.30.0.12:2379")])
    client, peer_url = closed_port_url(), peer_port(peer)
    result, status = run([client], peer_endpoints=[peer_url], formed=True)
    assert status == 1 and result["failed"] is True and "initial_cluster_state" not in result
    assert result["changed"] is False and result["actions"] == [] and result["answered_by"] == peer_url
    assert result["msg"] == (
        "the etcd cluster exists (the peer %s lists 2 members) but no member serves its client API now, so its "
        "membership cannot change; it lists this member's peer URLs as member etcd-2 (%s), which ran before (its "
        "data here is lost). Asked: %s: no connection: Connection refused; %s: 2 members. Bring a majority of the "
        "etcd members back up (the cluster needs a leader to change its membership), then rerun."
        % (peer_url, ID2, client, peer_url))
    assert requests_made == [("POST", client, LIST[0]), ("GET", peer_url, "/members")]


def test_not_listed_by_a_peer_fails(run, peer_port, requests_made):
    peer = FakePeer([P0])
    refused, client, peer_url = closed_port_url(), closed_port_url(), peer_port(peer)
    result, status = run([refused, client], peer_endpoints=[closed_port_url(), peer_url])
    assert status == 1 and result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith(
        "the etcd cluster exists (the peer %s lists 1 members) but no member serves its client API now, so its "
        "membership cannot change; this member (peer URLs http://127.30.0.12:2380) is not in it. Asked: " % peer_url)
    assert result["msg"].endswith("Bring a majority of the etcd members back up (the cluster needs a leader to "
                                  "change its membership), then rerun.")
    assert [r[0] for r in requests_made] == ["POST", "POST", "GET", "GET"] and requests_made[3][1] == peer_url
    assert len(result["asked"]) == 4 and peer.calls == [("GET", "/members")]


def test_nothing_answers_formed_fails_unknown_is_new(run, requests_made):
    client, peer_url = closed_port_url(), closed_port_url()
    result, status = run([client], peer_endpoints=[peer_url], formed=True)
    assert status == 1 and result["failed"] is True and "initial_cluster_state" not in result
    assert result["msg"] == (
        "the caller says a member has data (the cluster has formed), yet no member gives its member list on its "
        "client or peer port (%s: no connection: Connection refused; %s: no connection: Connection refused): start "
        "the etcd members (systemctl start) first, then rerun." % (client, peer_url))
    assert result["asked"] == [client + ": no connection: Connection refused",
                               peer_url + ": no connection: Connection refused"]
    assert requests_made == [("POST", client, LIST[0]), ("GET", peer_url, "/members")]
    result, status = run([client], peer_endpoints=[peer_url])
    assert status == 0 and result["initial_cluster_state"] == "new" and result["changed"] is False
    assert len(result["asked"]) == 2


def test_formed_false_is_new_and_asks_nobody(run, gateway, peer_port, requests_made):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")])
    peer = FakePeer([P0])
    client, peer_url = gateway(cluster), peer_port(peer)
    result, status = run([client], peer_endpoints=[peer_url], formed=False)
    assert status == 0 and result["initial_cluster_state"] == "new" and result["changed"] is False
    assert result["asked"] == [] and result["members"] == [] and result["answered_by"] is None
    assert result["msg"].startswith("no member has data (the caller checked every member)")
    assert cluster.calls == [] and peer.calls == [] and requests_made == []
    # nor does it read the TLS files: nobody is asked
    result, status = run(["https://127.30.0.11:2379"], peer_endpoints=["https://127.30.0.11:2380"], formed=False,
                         ca="/nonexistent/ca.crt")
    assert status == 0 and result["initial_cluster_state"] == "new"


def test_a_client_list_leaves_the_peers_unasked(run, gateway, peer_port):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")])
    peer = FakePeer([P0])
    result, status = run([gateway(cluster)], peer_endpoints=[peer_port(peer)], formed=True)
    assert status == 0 and result["actions"] == ["added http://127.30.0.12:2380"] and peer.calls == []


def test_no_quorum_at_a_client_endpoint_leaves_the_peers_unasked(run, gateway, peer_port):
    cluster = FakeEtcd([started(ID1, "etcd-1", "http://127.30.0.11:2380")], no_leader=True)
    peer = FakePeer([P0, peer_member(NEW_ID, MY_PEERS[0])])
    result, status = run([gateway(cluster)], peer_endpoints=[peer_port(peer)])
    assert status == 1 and "etcdserver: no leader" in result["msg"] and peer.calls == []


def test_peer_endpoints_must_match_the_endpoints(run):
    result, status = run(["http://127.30.0.11:2379", "http://127.30.0.13:2379"],
                         peer_endpoints=["http://127.30.0.11:2380"])
    assert status == 1 and result["msg"] == (
        "peer_endpoints must name one peer URL for each of endpoints, in the same order (2 endpoints, 1 "
        "peer_endpoints), or none")
    result, status = run(["http://127.30.0.11:2379"], peer_endpoints=["127.30.0.11:2380"])
    assert status == 1 and result["msg"].endswith("127.30.0.11:2380: not an http:// or https:// URL with a host")


def test_https_peer_endpoints_load_the_tls_files(run, tmp_path):
    result, status = run(["http://127.30.0.11:2379"], peer_endpoints=["https://127.30.0.11:2380"],
                         ca=str(tmp_path / "ca.crt"))
    assert status == 1 and result["msg"].startswith("cannot load the TLS files (ca %s" % (tmp_path / "ca.crt"))
