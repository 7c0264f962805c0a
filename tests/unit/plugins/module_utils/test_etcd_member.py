# -*- coding: utf-8 -*-
"""plugins/module_utils/_etcd_member.py: how a member with an empty data directory starts (new or existing) and
the membership change rejoining takes, from what the other members answered (client endpoints, then peer endpoints)
and what the caller knows (formed); every branch of plan, the classification of each endpoint's answers, the order
of asking, the apply of a plan; request/post against loopback servers (an answer, a GET, a refused port, a port that
accepts and never answers, a server that hangs up, TLS)."""
from __future__ import annotations

import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _etcd_member as E
from helpers import loopback_server

ME = "etcd-2"
MY_PEERS = ["http://127.30.0.12:2380"]
EP1, EP2, EP3 = "http://127.30.0.11:2379", "http://127.30.0.13:2379", "http://127.30.0.14:2379"
ID1, ID2, ID3 = "10501334649042878790", "9372538179322589801", "1545282837162315263"
REFUSED = "no connection: Connection refused"


def member(mid, name, peers, clients=()):
    return {"id": mid, "name": name, "peer_urls": list(peers), "client_urls": list(clients)}


ONE = member(ID1, "etcd-1", ["http://127.30.0.11:2380"], [EP1])
THREE = member(ID3, "etcd-3", ["http://127.30.0.13:2380"], [EP2])


def listed(endpoint, *members):
    return {"endpoint": endpoint, "outcome": E.LISTED, "detail": "%d members" % len(members),
            "members": list(members)}


def nobody(endpoint, detail=REFUSED):
    return {"endpoint": endpoint, "outcome": E.NOBODY, "detail": detail, "members": []}


def fault(endpoint, detail):
    return {"endpoint": endpoint, "outcome": E.FAULT, "detail": detail, "members": []}


PEER1, PEER2 = "http://127.30.0.11:2380", "http://127.30.0.13:2380"


def decide(answers, has_data=False, endpoints=(EP1, EP2), peers=None, check_mode=False, **more):
    return E.plan(has_data, list(endpoints), answers, ME, MY_PEERS if peers is None else peers, check_mode=check_mode,
                  **more)


def http_answer(status, body):
    return {"kind": E.HTTP, "status": status, "body": body if isinstance(body, str) else json.dumps(body),
            "error": ""}


DOWN = {"kind": E.DOWN, "status": None, "body": "", "error": "Connection refused"}
SILENT = {"kind": E.SILENT, "status": None, "body": "", "error": "no answer within 5 s"}
BROKEN = {"kind": E.BROKEN, "status": None, "body": "", "error": "Connection reset by peer"}
NO_LEADER = {"error": "etcdserver: no leader", "code": 14, "message": "etcdserver: no leader"}


def gateway_list(*members):
    """A member list as etcd's gateway writes it: empty fields left out."""
    out = []
    for m in members:
        raw = {"ID": m["id"], "peerURLs": m["peer_urls"]}
        if m["name"]:
            raw["name"] = m["name"]
        if m["client_urls"]:
            raw["clientURLs"] = m["client_urls"]
        out.append(raw)
    return {"header": {"cluster_id": "1", "member_id": "2", "raft_term": "3"}, "members": out}


# --- plan: nothing asked ------------------------------------------------------------------------------------------


def test_no_other_member_is_always_new():
    nothing = {"state": "new", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
               "msg": "no other members: a cluster of one member starts new", "answered_by": None, "members": []}
    assert decide([], endpoints=[]) == nothing
    assert decide([], has_data=True, endpoints=[]) == nothing
    assert decide([], endpoints=[], check_mode=True) == nothing


def test_member_data_means_existing_and_nothing_to_do():
    assert decide([], has_data=True) == {
        "state": "existing", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
        "msg": "the data directory holds this member's data: etcd starts from it and ignores the initial cluster "
               "state", "answered_by": None, "members": []}
    # whatever the cluster says: with data, its list is not read
    assert decide([listed(EP1, ONE)], has_data=True)["actions"] == []


# --- plan: nobody gave a list ---------------------------------------------------------------------------------------


def test_nobody_serving_means_the_cluster_forms_now():
    quiet = "accepts connections but answers nothing (no answer within 5 s): not ready, waiting for its cluster to form"
    got = decide([nobody(EP1), nobody(EP2, quiet)])
    assert got == {
        "state": "new", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
        "msg": "no other member serves yet (%s: %s; %s: %s): the cluster has not formed, this member starts it with "
               "the others (new)" % (EP1, REFUSED, EP2, quiet), "answered_by": None, "members": []}


def test_an_answer_without_a_list_fails_naming_every_endpoint_and_what_to_do():
    got = decide([nobody(EP1), fault(EP2, "HTTP 503: etcdserver: no leader")])
    assert got["failed"] is True and got["state"] is None and got["changed"] is False
    assert got["actions"] == [] and got["remove"] == [] and got["add"] is False
    assert got["msg"] == (
        "the etcd cluster exists but cannot list or change its membership now (%s: %s; %s: HTTP 503: etcdserver: no "
        "leader). Bring a majority of the etcd members back up (the cluster needs a leader to change its "
        "membership), then rerun." % (EP1, REFUSED, EP2))
    # a fault alone fails too, and in check mode
    assert decide([fault(EP1, "connected, then: reset")], endpoints=[EP1], check_mode=True)["failed"] is True


def test_a_later_endpoint_with_a_list_wins_over_earlier_faults():
    got = decide([fault(EP1, "HTTP 503: etcdserver: no leader"), nobody(EP2), listed(EP3, ONE, THREE)],
                 endpoints=[EP1, EP2, EP3])
    assert got["failed"] is False and got["state"] == "existing" and got["answered_by"] == EP3


# --- plan: a list ---------------------------------------------------------------------------------------------------


def test_data_lost_the_old_entry_is_removed_and_this_member_added():
    mine = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    got = decide([listed(EP1, ONE, mine, THREE)])
    assert got == {
        "state": "existing", "changed": True, "failed": False, "remove": [mine], "add": True,
        "actions": ["removed member etcd-2 (%s)" % ID2, "added http://127.30.0.12:2380"],
        "msg": "removed member etcd-2 (%s); added http://127.30.0.12:2380; etcd-2 joins the existing cluster" % ID2,
        "answered_by": EP1,
        "members": [{"name": "etcd-1", "peer_urls": ["http://127.30.0.11:2380"]},
                    {"name": "etcd-2", "peer_urls": MY_PEERS},
                    {"name": "etcd-3", "peer_urls": ["http://127.30.0.13:2380"]}]}


def test_check_mode_plans_the_same_and_says_so():
    mine = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    real, check = decide([listed(EP1, ONE, mine)]), decide([listed(EP1, ONE, mine)], check_mode=True)
    assert {k: v for k, v in check.items() if k != "msg"} == {k: v for k, v in real.items() if k != "msg"}
    assert check["msg"] == ("check mode, nothing changed; a run would do: removed member etcd-2 (%s); added "
                            "http://127.30.0.12:2380; then etcd-2 joins the existing cluster" % ID2)
    added = decide([listed(EP1, ONE)], check_mode=True)
    assert added["changed"] is True and added["actions"] == ["added http://127.30.0.12:2380"]
    assert added["msg"] == ("check mode, nothing changed; a run would do: added http://127.30.0.12:2380; then etcd-2 "
                            "joins the existing cluster")
    waiting = decide([listed(EP1, ONE, member(ID2, "", MY_PEERS))], check_mode=True)
    assert waiting["changed"] is False and waiting["msg"].startswith("etcd-2 is in the cluster already")


def test_added_but_never_started_is_left_to_join():
    waiting = member(ID2, "", MY_PEERS)
    got = decide([listed(EP1, ONE, waiting, THREE)])
    assert got["state"] == "existing" and got["changed"] is False and got["failed"] is False
    assert got["remove"] == [] and got["add"] is False and got["actions"] == []
    assert got["msg"] == ("etcd-2 is in the cluster already as member (unnamed, never started) (%s): it joins the "
                          "existing cluster" % ID2)
    assert got["members"][1] == {"name": "", "peer_urls": MY_PEERS}


def test_listed_in_the_initial_cluster_but_never_started_is_left_to_join():
    """A member of the initial cluster has its name from --initial-cluster before it ever ran; without client URLs
    it has not started (what etcd checks before it refuses to bootstrap a member twice)."""
    got = decide([listed(EP1, ONE, member(ID2, ME, MY_PEERS), THREE)])
    assert got["changed"] is False and got["actions"] == [] and got["state"] == "existing"
    assert got["msg"] == "etcd-2 is in the cluster already as member etcd-2 (%s): it joins the existing cluster" % ID2


def test_not_in_the_list_is_added():
    got = decide([listed(EP1, ONE, THREE)])
    assert got["state"] == "existing" and got["changed"] is True and got["remove"] == [] and got["add"] is True
    assert got["actions"] == ["added http://127.30.0.12:2380"]
    assert got["msg"] == "added http://127.30.0.12:2380; etcd-2 joins the existing cluster"


def test_our_name_under_other_peer_urls_is_replaced():
    old = member(ID2, ME, ["http://127.30.0.99:2380"], ["http://127.30.0.99:2379"])
    got = decide([listed(EP1, ONE, old, THREE)])
    assert got["remove"] == [old] and got["add"] is True
    assert got["actions"] == ["removed member etcd-2 (%s)" % ID2, "added http://127.30.0.12:2380"]
    # never started under the old URLs: replaced all the same
    stale = member(ID2, ME, ["http://127.30.0.99:2380"])
    assert decide([listed(EP1, ONE, stale)])["remove"] == [stale]


def test_a_never_started_entry_with_only_some_of_our_peer_urls_is_replaced():
    """etcd starting as existing checks its peer URLs against the cluster's entry: they must match."""
    peers = ["http://127.30.0.12:2380", "http://[fd00::12]:2380"]
    partial = member(ID2, "", ["http://127.30.0.12:2380"])
    got = decide([listed(EP1, ONE, partial)], peers=peers)
    assert got["remove"] == [partial] and got["add"] is True
    assert got["actions"] == ["removed member (unnamed, never started) (%s)" % ID2,
                              "added http://127.30.0.12:2380,http://[fd00::12]:2380"]
    exact = member(ID2, "", list(reversed(peers)))
    assert decide([listed(EP1, ONE, exact)], peers=peers)["actions"] == []


def test_peer_urls_compare_without_case_or_trailing_slash():
    waiting = member(ID2, "", ["HTTP://127.30.0.12:2380/"])
    assert decide([listed(EP1, ONE, waiting)])["actions"] == []


def test_a_stale_entry_under_our_name_goes_while_the_waiting_one_stays():
    stale = member(ID1, ME, ["http://127.30.0.99:2380"], ["http://127.30.0.99:2379"])
    waiting = member(ID2, "", MY_PEERS)
    got = decide([listed(EP1, stale, waiting, THREE)])
    assert got["remove"] == [stale] and got["add"] is False and got["changed"] is True
    assert got["actions"] == ["removed member etcd-2 (%s)" % ID1]


def test_other_members_are_never_touched():
    other = member(ID2, "etcd-22", ["http://127.30.0.122:2380"], ["http://127.30.0.122:2379"])
    got = decide([listed(EP1, ONE, other, THREE)])
    assert got["remove"] == [] and got["actions"] == ["added http://127.30.0.12:2380"]


def test_refuses_to_remove_the_member_that_answered():
    """Our entry answered at an endpoint itself: it runs, yet this host's data directory is empty (a wrong
    data_dir, or our own client URL among the endpoints): removing it would remove a live member."""
    live = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379/"])
    got = decide([listed("http://127.30.0.12:2379", ONE, live)], endpoints=["http://127.30.0.12:2379"])
    assert got["failed"] is True and got["remove"] == [] and got["actions"] == [] and got["state"] is None
    assert got["msg"] == (
        "member etcd-2 (%s) would be removed, but it answered at http://127.30.0.12:2379 itself: it runs, while this "
        "host's data directory holds no member data. Nothing was changed. Check data_dir, and that endpoints lists "
        "the other members' client URLs only." % ID2)
    assert got["answered_by"] == "http://127.30.0.12:2379" and len(got["members"]) == 2


# --- plan: what the caller knows (formed) ------------------------------------------------------------------------


FIRST_FORMATION = ("no member has data (the caller checked every member): the cluster forms now, this member starts "
                   "it with the others (new); nobody was asked")


def test_formed_false_is_new_whatever_was_answered():
    nothing = {"state": "new", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
               "msg": FIRST_FORMATION, "answered_by": None, "members": []}
    assert decide([], formed=False) == nothing
    # it is decided before any answer is read (the module asks nobody then)
    assert decide([listed(EP1, ONE)], formed=False) == nothing
    assert decide([fault(EP1, "HTTP 503: etcdserver: no leader")], formed=False, check_mode=True) == nothing
    assert decide([nobody(EP1)], formed=False, peer_answers=[peer_listed(PEER1, ONE)]) == nothing


def test_formed_false_yields_to_member_data_and_to_a_cluster_of_one():
    assert decide([], has_data=True, formed=False)["state"] == "existing"
    assert decide([], endpoints=[], formed=False)["msg"] == "no other members: a cluster of one member starts new"


@pytest.mark.parametrize("formed", [True, None])
def test_formed_true_or_unknown_changes_nothing_when_a_client_endpoint_answers(formed):
    mine = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    with_list = [listed(EP1, ONE, mine)]
    assert decide(with_list, formed=formed) == decide(with_list)
    assert decide(with_list, formed=formed)["actions"] == ["removed member etcd-2 (%s)" % ID2,
                                                           "added http://127.30.0.12:2380"]
    faulty = [nobody(EP1), fault(EP2, "HTTP 503: etcdserver: no leader")]
    assert decide(faulty, formed=formed) == decide(faulty) and decide(faulty)["failed"] is True
    # peer answers are read only when no client endpoint serves
    waiting = [peer_listed(PEER1, ONE, member(ID2, "", MY_PEERS))]
    assert decide(faulty, formed=formed, peer_answers=waiting) == decide(faulty)
    assert decide(with_list, formed=formed, peer_answers=waiting) == decide(with_list)


# --- plan: nobody serves a client endpoint, the peer ports ---------------------------------------------------------


def peer_listed(endpoint, *members):
    return {"endpoint": endpoint, "outcome": E.LISTED, "detail": "%d members" % len(members),
            "members": list(members)}


QUIET = "accepts connections but answers nothing (no answer within 5 s): not ready, waiting for its cluster to form"
SAID = "%s: %s; %s: %s" % (EP1, QUIET, EP2, REFUSED)
NOBODY_SERVES = [nobody(EP1, QUIET), nobody(EP2)]


@pytest.mark.parametrize("formed", [True, None])
def test_added_never_started_and_listed_by_a_peer_joins_existing(formed):
    """The case seen live: etcd-1 (with data) restarted and waits for its quorum, this member was added through it
    and never started; etcd-1 serves only its peer port, which lists this member."""
    waiting = member(ID2, "", MY_PEERS)
    peer_answers = [nobody(PEER1), peer_listed(PEER2, ONE, waiting)]
    got = decide(NOBODY_SERVES, formed=formed, peer_answers=peer_answers)
    assert got == {
        "state": "existing", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
        "msg": "no member serves its client API (%s; %s: %s; %s: 2 members), but the peer %s lists member "
               "(unnamed, never started) (%s) with this member's peer URLs, never started: the cluster waits for it "
               "(it was added, or is an initial member of a cluster that forms now); it joins the existing cluster"
               % (SAID, PEER1, REFUSED, PEER2, PEER2, ID2),
        "answered_by": PEER2,
        "members": [{"name": "etcd-1", "peer_urls": ["http://127.30.0.11:2380"]}, {"name": "", "peer_urls": MY_PEERS}]}
    assert decide(NOBODY_SERVES, formed=formed, peer_answers=peer_answers, check_mode=True) == got


def test_an_initial_member_of_a_forming_cluster_listed_by_a_peer_joins_existing():
    """A cluster that forms now: its members wait for their quorum and list the initial cluster, names from
    --initial-cluster, nobody with client URLs."""
    initial = member(ID2, ME, ["HTTP://127.30.0.12:2380/"])
    got = decide(NOBODY_SERVES, peer_answers=[peer_listed(PEER1, member(ID1, "etcd-1", [PEER1]), initial)])
    assert got["state"] == "existing" and got["failed"] is False and got["changed"] is False
    assert "the peer %s lists member etcd-2 (%s) with this member's peer URLs" % (PEER1, ID2) in got["msg"]


def test_the_first_peer_list_decides():
    waiting = member(ID2, "", MY_PEERS)
    got = decide(NOBODY_SERVES, peer_answers=[peer_listed(PEER1, ONE), peer_listed(PEER2, ONE, waiting)])
    assert got["failed"] is True and got["answered_by"] == PEER1


def fails_as_no_quorum(got, why, peer=PEER1, count=2, said=SAID + "; %s: 2 members" % PEER1):
    assert got["failed"] is True and got["state"] is None and got["changed"] is False
    assert got["actions"] == [] and got["remove"] == [] and got["add"] is False and got["answered_by"] == peer
    assert got["msg"] == (
        "the etcd cluster exists (the peer %s lists %d members) but no member serves its client API now, so its "
        "membership cannot change; %s. Asked: %s. Bring a majority of the etcd members back up (the cluster needs a "
        "leader to change its membership), then rerun." % (peer, count, why, said))


@pytest.mark.parametrize("formed", [True, None])
def test_a_peer_list_with_this_member_started_before_fails(formed):
    """This member ran before (client URLs) and its data is gone: it would be removed and added, which needs a
    leader."""
    ran = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    got = decide(NOBODY_SERVES, formed=formed, peer_answers=[peer_listed(PEER1, ONE, ran)])
    fails_as_no_quorum(got, "it lists this member's peer URLs as member etcd-2 (%s), which ran before (its data "
                            "here is lost)" % ID2)
    assert got["members"][1] == {"name": ME, "peer_urls": MY_PEERS}


@pytest.mark.parametrize("formed", [True, None])
def test_a_peer_list_without_this_member_fails(formed):
    other = member(ID3, ME, ["http://127.30.0.99:2380"])  # our name, other peer URLs: not ours
    got = decide(NOBODY_SERVES, formed=formed, peer_answers=[peer_listed(PEER1, ONE, other)])
    fails_as_no_quorum(got, "this member (peer URLs http://127.30.0.12:2380) is not in it")


def test_a_peer_list_with_only_some_of_our_peer_urls_fails():
    peers = ["http://127.30.0.12:2380", "http://[fd00::12]:2380"]
    partial = member(ID2, "", ["http://127.30.0.12:2380"])
    got = decide(NOBODY_SERVES, peers=peers, peer_answers=[peer_listed(PEER1, ONE, partial)])
    fails_as_no_quorum(got, "it lists member (unnamed, never started) (%s) with peer URLs http://127.30.0.12:2380, "
                            "not exactly this member's (http://127.30.0.12:2380,http://[fd00::12]:2380)" % ID2)
    exact = member(ID2, "", list(reversed(peers)))
    assert decide(NOBODY_SERVES, peers=peers, peer_answers=[peer_listed(PEER1, ONE, exact)])["state"] == "existing"
    # an initial member (named from --initial-cluster) that never started, with only some of them: the same
    named = member(ID2, ME, ["http://127.30.0.12:2380"])
    fails_as_no_quorum(decide(NOBODY_SERVES, peers=peers, peer_answers=[peer_listed(PEER1, ONE, named)]),
                       "it lists member etcd-2 (%s) with peer URLs http://127.30.0.12:2380, not exactly this "
                       "member's (http://127.30.0.12:2380,http://[fd00::12]:2380)" % ID2)


def test_formed_but_nothing_answers_fails_saying_to_start_the_members():
    peer_answers = [nobody(PEER1), nobody(PEER2)]
    got = decide(NOBODY_SERVES, formed=True, peer_answers=peer_answers)
    assert got == {
        "state": None, "changed": False, "failed": True, "remove": [], "add": False, "actions": [],
        "msg": "the caller says a member has data (the cluster has formed), yet no member gives its member list on "
               "its client or peer port (%s; %s: %s; %s: %s): start the etcd members (systemctl start) first, then "
               "rerun." % (SAID, PEER1, REFUSED, PEER2, REFUSED), "answered_by": None, "members": []}
    # without peer endpoints to ask, the same, and it says so
    assert decide(NOBODY_SERVES, formed=True)["msg"] == (
        "the caller says a member has data (the cluster has formed), yet no member gives its member list on its "
        "client or peer port (%s; no peer endpoints to ask): start the etcd members (systemctl start) first, then "
        "rerun." % SAID)
    # a peer that answers without a list is no list either
    silent = fault(PEER1, "accepts connections but answers nothing (no answer within 5 s)")
    assert decide(NOBODY_SERVES, formed=True, peer_answers=[silent])["failed"] is True


def test_not_known_and_nothing_answers_is_new_as_before():
    got = decide(NOBODY_SERVES, peer_answers=[nobody(PEER1), nobody(PEER2)])
    assert got == {
        "state": "new", "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
        "msg": "no other member serves yet (%s; %s: %s; %s: %s): the cluster has not formed, this member starts it "
               "with the others (new)" % (SAID, PEER1, REFUSED, PEER2, REFUSED), "answered_by": None, "members": []}
    assert decide(NOBODY_SERVES)["state"] == "new"


def test_not_known_and_a_peer_port_answers_without_a_list_fails():
    """Something serves a peer port but gives no list (a TLS mismatch, an etcd still starting, another server):
    whether the cluster formed cannot be told, so no second cluster is started."""
    odd = fault(PEER2, "HTTP 404: 404 page not found")
    got = decide(NOBODY_SERVES, peer_answers=[nobody(PEER1), odd])
    assert got["failed"] is True and got["state"] is None and got["changed"] is False
    assert got["msg"] == (
        "no other member serves its client API, and a peer port answered without a member list (%s; %s: %s; %s: HTTP "
        "404: 404 page not found): whether the cluster has formed cannot be told. Nothing was changed. Check the "
        "peer URLs and TLS files, or start the etcd members, then rerun." % (SAID, PEER1, REFUSED, PEER2))


# --- should_ask, should_ask_peers: who is asked ------------------------------------------------------------------


@pytest.mark.parametrize("has_data, endpoints, formed, asked", [
    (False, [EP1], None, True),
    (False, [EP1], True, True),
    (False, [EP1], False, False),
    (True, [EP1], None, False),
    (True, [EP1], True, False),
    (False, [], None, False),
    (False, [], True, False),
])
def test_should_ask(has_data, endpoints, formed, asked):
    assert E.should_ask(has_data, endpoints, formed) is asked


@pytest.mark.parametrize("has_data, formed, answers, asked", [
    (False, None, [nobody(EP1), nobody(EP2, QUIET)], True),
    (False, True, [nobody(EP1)], True),
    (False, False, [nobody(EP1)], False),
    (True, None, [nobody(EP1)], False),
    (False, None, [nobody(EP1), listed(EP2, ONE)], False),
    (False, None, [nobody(EP1), fault(EP2, "HTTP 503: etcdserver: no leader")], False),
    (False, True, [fault(EP1, "connected, then: reset")], False),
    (False, None, [], False),
])
def test_should_ask_peers(has_data, formed, answers, asked):
    assert E.should_ask_peers(has_data, [EP1, EP2], formed, answers) is asked
    assert E.should_ask_peers(has_data, [], formed, answers) is False


# --- classify: what an endpoint came to ----------------------------------------------------------------------------


def test_classify_a_member_list():
    got = E.classify(EP1, http_answer(200, gateway_list(ONE, member(ID2, "", MY_PEERS))))
    assert got == {"endpoint": EP1, "outcome": E.LISTED, "detail": "2 members",
                   "members": [ONE, member(ID2, "", MY_PEERS)]}


@pytest.mark.parametrize("answer, again, outcome, detail", [
    (DOWN, None, E.NOBODY, "no connection: Connection refused"),
    (BROKEN, None, E.FAULT, "connected, then: Connection reset by peer"),
    (http_answer(503, NO_LEADER), None, E.FAULT, "HTTP 503: etcdserver: no leader"),
    (http_answer(500, "<html>\n  oops </html>"), None, E.FAULT, "HTTP 500: <html> oops </html>"),
    (http_answer(200, "not json"), None, E.FAULT, "HTTP 200 but Expecting value: line 1 column 1 (char 0)"),
    (http_answer(200, {"members": []}), None, E.FAULT, "HTTP 200 but no member list in the answer"),
    (SILENT, None, E.NOBODY,
     "accepts connections but answers nothing (no answer within 5 s): not ready, waiting for its cluster to form"),
    (SILENT, SILENT, E.NOBODY,
     "accepts connections but answers nothing (no answer within 5 s): not ready, waiting for its cluster to form"),
    (SILENT, DOWN, E.NOBODY,
     "accepts connections but answers nothing (no answer within 5 s): not ready, waiting for its cluster to form"),
    (SILENT, http_answer(200, gateway_list(ONE)), E.FAULT,
     "gave no linearizable member list (no answer within 5 s) but its own list at once: it runs without a leader or "
     "quorum"),
    (SILENT, http_answer(200, "{}"), E.FAULT,
     "gave no linearizable member list (no answer within 5 s); asked without: HTTP 200: {}"),
    (SILENT, http_answer(503, gateway_list(ONE)), E.FAULT,
     "gave no linearizable member list (no answer within 5 s); asked without: HTTP 503: %s"
     % json.dumps(gateway_list(ONE))[:200]),
    (SILENT, http_answer(404, "404 page not found"), E.FAULT,
     "gave no linearizable member list (no answer within 5 s); asked without: HTTP 404: 404 page not found"),
    (SILENT, BROKEN, E.FAULT,
     "gave no linearizable member list (no answer within 5 s); asked without: Connection reset by peer"),
])
def test_classify(answer, again, outcome, detail):
    assert E.classify(EP2, answer, again) == {"endpoint": EP2, "outcome": outcome, "detail": detail, "members": []}


def test_parse_members_fills_what_the_gateway_leaves_out():
    body = json.dumps({"members": [{"ID": ID1, "peerURLs": ["http://a:2380"]},
                                   {"ID": 7, "name": "b", "peerURLs": ["http://b:2380"], "clientURLs": ["http://b:1"],
                                    "isLearner": False}]})
    assert E.parse_members(body) == [member(ID1, "", ["http://a:2380"]),
                                     member(7, "b", ["http://b:2380"], ["http://b:1"])]
    assert E.parse_members(json.dumps({"members": [{"ID": ID1}]})) == [member(ID1, "", [])]


@pytest.mark.parametrize("body, error", [
    ([], "no member list in the answer"),
    ({"header": {}}, "no member list in the answer"),
    ({"members": {"ID": "1"}}, "no member list in the answer"),
    ({"members": []}, "no member list in the answer"),
    ({"members": ["x"]}, "a member without an ID: 'x'"),
    ({"members": [{"name": "a"}]}, "a member without an ID: {'name': 'a'}"),
    ({"members": [{"ID": "-1"}]}, "a member without an ID: {'ID': '-1'}"),
    ({"members": [{"ID": "1", "peerURLs": [5]}]}, "a member's URLs are not strings: {'ID': '1', 'peerURLs': [5]}"),
    ({"members": [{"ID": "1", "clientURLs": [None]}]},
     "a member's URLs are not strings: {'ID': '1', 'clientURLs': [None]}"),
])
def test_parse_members_refuses_what_is_not_a_member_list(body, error):
    with pytest.raises(ValueError) as raised:
        E.parse_members(json.dumps(body))
    assert str(raised.value) == error


def peer_list(*members):
    """A member list as etcd's peer port writes it (GET /members, the JSON of its membership): the ID a number,
    peerURLs always there (null when empty), isLearner, name and clientURLs left out while empty."""
    out = []
    for m in members:
        raw = {"id": int(m["id"]), "peerURLs": m["peer_urls"] or None}
        if m["name"]:
            raw["name"] = m["name"]
        if m["client_urls"]:
            raw["clientURLs"] = m["client_urls"]
        out.append(raw)
    return out


def test_parse_peer_members_reads_etcds_membership_json():
    waiting = member(ID2, "", MY_PEERS)
    assert E.parse_peer_members(json.dumps(peer_list(ONE, waiting)) + "\n") == [ONE, waiting]
    assert E.parse_peer_members(json.dumps([{"id": 5, "peerURLs": None, "isLearner": True}])) == [member("5", "", [])]
    # an ID written as (hex) text, as the v2 members API writes it, is kept as it is
    assert E.parse_peer_members(json.dumps([{"id": "91bc3c398fb3c146", "name": "a", "peerURLs": ["http://a:2380"]}])) \
        == [member("91bc3c398fb3c146", "a", ["http://a:2380"])]


@pytest.mark.parametrize("body, error", [
    ({"members": [{"id": 1}]}, "no member list in the answer"),
    ([], "no member list in the answer"),
    ("members", "no member list in the answer"),
    (["x"], "a member without an ID: 'x'"),
    ([{"name": "a"}], "a member without an ID: {'name': 'a'}"),
    ([{"id": True}], "a member without an ID: {'id': True}"),
    ([{"id": " "}], "a member without an ID: {'id': ' '}"),
    ([{"id": 1.5}], "a member without an ID: {'id': 1.5}"),
    ([{"id": 1, "peerURLs": "http://a:2380"}],
     "a member's URLs are not lists of strings: {'id': 1, 'peerURLs': 'http://a:2380'}"),
    ([{"id": 1, "clientURLs": [3]}], "a member's URLs are not lists of strings: {'id': 1, 'clientURLs': [3]}"),
    ([{"id": 1, "name": 7}], "a member's name is not a string: {'id': 1, 'name': 7}"),
])
def test_parse_peer_members_refuses_what_is_not_a_member_list(body, error):
    with pytest.raises(ValueError) as raised:
        E.parse_peer_members(json.dumps(body))
    assert str(raised.value) == error


def test_classify_peer_a_member_list():
    got = E.classify_peer(PEER1, http_answer(200, peer_list(ONE, member(ID2, "", MY_PEERS))))
    assert got == {"endpoint": PEER1, "outcome": E.LISTED, "detail": "2 members",
                   "members": [ONE, member(ID2, "", MY_PEERS)]}


@pytest.mark.parametrize("answer, outcome, detail", [
    (DOWN, E.NOBODY, "no connection: Connection refused"),
    (SILENT, E.FAULT, "accepts connections but answers nothing (no answer within 5 s)"),
    (BROKEN, E.FAULT, "connected, then: Connection reset by peer"),
    (http_answer(404, "404 page not found\n"), E.FAULT, "HTTP 404: 404 page not found"),
    (http_answer(405, "Method Not Allowed"), E.FAULT, "HTTP 405: Method Not Allowed"),
    (http_answer(200, gateway_list(ONE)), E.FAULT, "HTTP 200 but no member list in the answer"),
    (http_answer(200, "<html>"), E.FAULT, "HTTP 200 but Expecting value: line 1 column 1 (char 0)"),
])
def test_classify_peer(answer, outcome, detail):
    assert E.classify_peer(PEER2, answer) == {"endpoint": PEER2, "outcome": outcome, "detail": detail, "members": []}


@pytest.mark.parametrize("body, text", [
    (json.dumps(NO_LEADER), "etcdserver: no leader"),
    (json.dumps({"error": "only error"}), "only error"),
    (json.dumps({"message": "only message", "error": "other"}), "only message"),
    (json.dumps({"message": "message, no error", "error": ""}), "message, no error"),
    (json.dumps({"code": 2}), '{"code": 2}'),
    (json.dumps(["a"]), '["a"]'),
    ("", "(empty body)"),
    ("  \n ", "(empty body)"),
    ("x" * 300, "x" * 200),
])
def test_error_text(body, text):
    assert E.error_text(body) == text


def test_describe():
    assert E.describe(http_answer(503, NO_LEADER)) == "HTTP 503: etcdserver: no leader"
    assert E.describe(SILENT) == "no answer within 5 s"


# --- ask_members: the order of asking --------------------------------------------------------------------------------


class FakePost(object):
    """post's stand-in: answers by (endpoint, linearizable) from a table, records every request."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def __call__(self, endpoint, path, payload, timeout):
        self.calls.append((endpoint, path, payload, timeout))
        key = (endpoint, payload.get("linearizable")) if path == E.LIST else (endpoint, path)
        return self.table[key]


def test_asks_in_order_and_stops_at_the_first_list():
    fake = FakePost({(EP1, True): DOWN, (EP2, True): http_answer(200, gateway_list(ONE)), (EP3, True): DOWN})
    got = E.ask_members([EP1, EP2, EP3], 2.5, post_fn=fake)
    assert fake.calls == [(EP1, E.LIST, {"linearizable": True}, 2.5), (EP2, E.LIST, {"linearizable": True}, 2.5)]
    assert [a["outcome"] for a in got] == [E.NOBODY, E.LISTED] and got[1]["members"] == [ONE]


def test_a_silent_endpoint_is_asked_again_without_linearizable():
    fake = FakePost({(EP1, True): SILENT, (EP1, False): http_answer(200, gateway_list(ONE)),
                     (EP2, True): http_answer(503, NO_LEADER)})
    got = E.ask_members([EP1, EP2], 3, post_fn=fake)
    assert fake.calls == [(EP1, E.LIST, {"linearizable": True}, 3), (EP1, E.LIST, {"linearizable": False}, 3),
                          (EP2, E.LIST, {"linearizable": True}, 3)]
    assert [a["outcome"] for a in got] == [E.FAULT, E.FAULT]
    assert got[0]["detail"].endswith("it runs without a leader or quorum")


def test_nobody_asked_without_endpoints():
    assert E.ask_members([], 5, post_fn=lambda *a: pytest.fail("asked")) == []


class FakeRequest(object):
    """request's stand-in: answers by endpoint from a table, records every request."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def __call__(self, endpoint, method, path, payload, timeout):
        self.calls.append((endpoint, method, path, payload, timeout))
        return self.table[endpoint]


def test_asks_the_peers_in_order_with_get_and_stops_at_the_first_list():
    peer3 = "http://127.30.0.14:2380"
    fake = FakeRequest({PEER1: http_answer(404, "404 page not found"), PEER2: http_answer(200, peer_list(ONE)),
                        peer3: DOWN})
    got = E.ask_peers([PEER1, PEER2, peer3], 2.5, request_fn=fake)
    assert fake.calls == [(PEER1, "GET", "/members", None, 2.5), (PEER2, "GET", "/members", None, 2.5)]
    assert [a["outcome"] for a in got] == [E.FAULT, E.LISTED] and got[1]["members"] == [ONE]
    assert [a["endpoint"] for a in got] == [PEER1, PEER2]


def test_asks_every_peer_when_none_gives_a_list():
    fake = FakeRequest({PEER1: DOWN, PEER2: SILENT})
    got = E.ask_peers([PEER1, PEER2], 1, request_fn=fake)
    assert [c[0] for c in fake.calls] == [PEER1, PEER2] and [a["outcome"] for a in got] == [E.NOBODY, E.FAULT]


def test_no_peer_asked_without_peer_endpoints():
    assert E.ask_peers([], 5, request_fn=lambda *a: pytest.fail("asked")) == []


# --- apply: the changes, in order, and where they stop ---------------------------------------------------------------


def planned(*members, add=True):
    return {"answered_by": EP1, "remove": list(members), "add": add}


def test_apply_removes_by_the_id_as_given_then_adds():
    old = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    fake = FakePost({(EP1, E.REMOVE): http_answer(200, {"members": []}),
                     (EP1, E.ADD): http_answer(200, {"member": {"ID": "5"}})})
    assert E.apply(planned(old), MY_PEERS, 4, post_fn=fake) == (
        ["removed member etcd-2 (%s)" % ID2, "added http://127.30.0.12:2380"], None)
    assert fake.calls == [(EP1, E.REMOVE, {"ID": ID2}, 4), (EP1, E.ADD, {"peerURLs": MY_PEERS}, 4)]


def test_apply_with_several_peer_urls():
    peers = ["http://127.30.0.12:2380", "http://[fd00::12]:2380"]
    fake = FakePost({(EP1, E.ADD): http_answer(200, {"member": {"ID": "5"}})})
    assert E.apply(planned(), peers, 4, post_fn=fake) == (
        ["added http://127.30.0.12:2380,http://[fd00::12]:2380"], None)
    assert fake.calls == [(EP1, E.ADD, {"peerURLs": peers}, 4)]
    fake = FakePost({(EP1, E.ADD): http_answer(400, {"message": "etcdserver: Peer URLs already exists"})})
    assert E.apply(planned(), peers, 4, post_fn=fake) == ([], (
        "adding http://127.30.0.12:2380,http://[fd00::12]:2380 through %s failed: HTTP 400: etcdserver: Peer URLs "
        "already exists. Nothing was changed before. A rerun starts from the member list as it is then." % EP1))


def test_apply_add_only_and_nothing():
    fake = FakePost({(EP1, E.ADD): http_answer(200, {"member": {"ID": "5"}})})
    assert E.apply(planned(), MY_PEERS, 4, post_fn=fake) == (["added http://127.30.0.12:2380"], None)
    assert E.apply(planned(add=False), MY_PEERS, 4, post_fn=lambda *a: pytest.fail("asked")) == ([], None)


def test_a_refused_removal_stops_before_the_addition():
    old = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    fake = FakePost({(EP1, E.REMOVE): http_answer(503, NO_LEADER)})
    assert E.apply(planned(old), MY_PEERS, 4, post_fn=fake) == ([], (
        "removing member etcd-2 (%s) through %s failed: HTTP 503: etcdserver: no leader. Nothing was changed before. "
        "A rerun starts from the member list as it is then." % (ID2, EP1)))
    assert [c[1] for c in fake.calls] == [E.REMOVE]


def test_a_failed_addition_says_what_was_removed_before():
    old = member(ID2, ME, MY_PEERS, ["http://127.30.0.12:2379"])
    fake = FakePost({(EP1, E.REMOVE): http_answer(200, {}), (EP1, E.ADD): SILENT})
    done, error = E.apply(planned(old), MY_PEERS, 4, post_fn=fake)
    assert done == ["removed member etcd-2 (%s)" % ID2]
    assert error == ("adding http://127.30.0.12:2380 through %s failed: no answer within 5 s. Done before: removed "
                     "member etcd-2 (%s). Without an answer, the failed change may still take effect. A rerun starts "
                     "from the member list as it is then." % (EP1, ID2))


@pytest.mark.parametrize("answer, may", [(SILENT, True), (BROKEN, True), (DOWN, False),
                                         (http_answer(400, {"message": "etcdserver: Peer URLs already exists"}),
                                          False)])
def test_changed_so_far(answer, may):
    text = E.changed_so_far([], answer)
    assert text == ("Nothing was changed before. " + ("Without an answer, the failed change may still take effect. "
                                                      if may else "") + "A rerun starts from the member list as it "
                    "is then.")
    assert E.changed_so_far(["a", "b"], DOWN) == "Done before: a; b. A rerun starts from the member list as it is then."


# --- small helpers ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url, normal", [
    ("HTTP://127.30.0.12:2380/", "http://127.30.0.12:2380"),
    (" https://Etcd-1.Example:2380 ", "https://etcd-1.example:2380"),
    ("http://[FD00::1]:2380", "http://[fd00::1]:2380"),
    ("http://a:1/x/", "http://a:1/x"),
    ("http://a:1/X/", "http://a:1/X"),
])
def test_norm_url(url, normal):
    assert E.norm_url(url) == normal


def test_endpoint_problems():
    assert E.endpoint_problems(["http://127.0.0.1:2379", "https://[fd00::1]:2379/", "http://h"]) == []
    assert E.endpoint_problems(["127.0.0.1:2379", "ftp://a:1", "http://:2379", "http://a:port", "http://[::1",
                                "http://a:0"]) == [
        "127.0.0.1:2379: not an http:// or https:// URL with a host",
        "ftp://a:1: not an http:// or https:// URL with a host",
        "http://:2379: not an http:// or https:// URL with a host",
        "http://a:port: Port could not be cast to integer value as 'port'",
        "http://[::1: Invalid IPv6 URL",
        "http://a:0: not an http:// or https:// URL with a host"]


def test_member_text():
    assert E.member_text(member(ID1, "etcd-1", [])) == "member etcd-1 (%s)" % ID1
    assert E.member_text(member(ID1, "", [])) == "member (unnamed, never started) (%s)" % ID1


def test_reason():
    assert E.reason(ConnectionRefusedError(111, "Connection refused")) == "Connection refused"
    assert E.reason(socket.timeout("timed out")) == "timed out"
    assert E.reason(ValueError()) == "ValueError"


# --- post, against loopback servers -----------------------------------------------------------------------------------


class Gateway(http.server.BaseHTTPRequestHandler):
    seen, hosts, gets = [], [], []

    def do_GET(self):  # noqa: N802 (http.server's name)
        """The peer port's member list (GET /members), as etcd writes it; 404 elsewhere."""
        Gateway.gets.append((self.path, self.headers["Content-Type"], self.headers["Content-Length"]))
        code, out = (200, json.dumps(peer_list(ONE)).encode()) if self.path.endswith("/members") else (
            404, b"404 page not found\n")
        self.send_response(code)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Gateway.seen.append((self.path, self.headers["Content-Type"], json.loads(body)))
        Gateway.hosts.append(self.headers["Host"])
        if self.path == "/hangup":
            self.connection.close()  # the member list never comes
            return
        code, out = (200, b'{"members": []}') if self.path.endswith(E.LIST) else (503, b'{"error": "x"}')
        if self.path == "/latin1":
            code, out = 500, b"caf\xe9"
        self.send_response(code)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    yield from loopback_server(Gateway)


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_post_an_answer(base):
    Gateway.seen.clear()
    Gateway.hosts.clear()
    assert E.post(base, E.LIST, {"linearizable": True}, 5) == {
        "kind": E.HTTP, "status": 200, "body": '{"members": []}', "error": ""}
    assert E.post(base + "/prefix/", E.ADD, {"peerURLs": ["u"]}, 5) == {
        "kind": E.HTTP, "status": 503, "body": '{"error": "x"}', "error": ""}
    assert Gateway.seen == [(E.LIST, "application/json", {"linearizable": True}),
                            ("/prefix" + E.ADD, "application/json", {"peerURLs": ["u"]})]
    assert Gateway.hosts == [base[len("http://"):]] * 2
    Gateway.seen.clear()
    E.post(base + "/X/", E.LIST, {}, 5)
    assert Gateway.seen == [("/X" + E.LIST, "application/json", {})]


def test_request_a_get_sends_no_body(base):
    Gateway.gets.clear()
    Gateway.seen.clear()
    assert E.request(base, "GET", E.PEER_MEMBERS, None, 5) == {
        "kind": E.HTTP, "status": 200, "body": json.dumps(peer_list(ONE)), "error": ""}
    assert E.request(base + "/p/", "GET", "/other", None, 5)["status"] == 404
    assert Gateway.gets == [("/members", None, None), ("/p/other", None, None)] and Gateway.seen == []
    assert E.classify_peer(base, E.request(base, "GET", E.PEER_MEMBERS, None, 5))["members"] == [ONE]


def test_request_a_post_is_what_post_sends(base):
    Gateway.seen.clear()
    assert E.request(base, "POST", E.LIST, {"linearizable": False}, 5) == E.post(base, E.LIST, {"linearizable": False},
                                                                                 5)
    assert Gateway.seen == [(E.LIST, "application/json", {"linearizable": False})] * 2


def test_post_an_answer_that_is_not_utf8(base):
    assert E.post(base + "/latin1", "", {}, 5) == {"kind": E.HTTP, "status": 500, "body": "caf\ufffd", "error": ""}


@pytest.mark.parametrize("url, address", [("http://etcd-1", ("etcd-1", 80)), ("https://etcd-1/", ("etcd-1", 443)),
                                          ("https://etcd-1:2379", ("etcd-1", 2379))])
def test_post_default_ports(monkeypatch, url, address):
    seen = []

    def refuse(where, timeout):
        seen.append((where, timeout))
        raise ConnectionRefusedError(111, "Connection refused")
    monkeypatch.setattr(E.socket, "create_connection", refuse)
    assert E.post(url, E.LIST, {}, 1.5) == {"kind": E.DOWN, "status": None, "body": "", "error": "Connection refused"}
    assert seen == [(address, 1.5)]


def test_post_to_a_closed_port_is_down():
    got = E.post("http://127.0.0.1:%d" % free_port(), E.LIST, {}, 5)
    assert got == {"kind": E.DOWN, "status": None, "body": "", "error": "Connection refused"}


def test_post_to_a_port_that_never_answers_is_silent():
    """What an etcd that is not ready yet does: its client port accepts connections, nothing answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        got = E.post("http://127.0.0.1:%d" % sock.getsockname()[1], E.LIST, {}, 0.3)
    finally:
        sock.close()
    assert got == {"kind": E.SILENT, "status": None, "body": "", "error": "no answer within 0.3 s"}


def test_post_to_a_server_that_hangs_up_is_broken(base):
    got = E.post(base + "/hangup", "", {}, 5)
    assert got == {"kind": E.BROKEN, "status": None, "body": "",
                   "error": "Remote end closed connection without response"}


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (its own CA), made with the openssl tool."""
    if shutil.which("openssl") is None:
        pytest.fail("this test makes its certificate with the openssl tool, which is missing: apt-get install openssl",
                    pytrace=False)
    where = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "c.key", "-out", "c.crt",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   cwd=where, check=True, capture_output=True, timeout=60)
    return str(where / "c.crt"), str(where / "c.key")


@pytest.fixture
def tls_base(certificate):
    """An https gateway that asks for a client certificate signed by the same CA."""
    crt, key = certificate
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    context.load_verify_locations(crt)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_post_over_tls_with_a_client_certificate(tls_base, certificate):
    crt, key = certificate
    got = E.post(tls_base, E.LIST, {"linearizable": True}, 5, context=E.tls_context(crt, crt, key))
    assert got == {"kind": E.HTTP, "status": 200, "body": '{"members": []}', "error": ""}


def test_get_over_tls_with_a_client_certificate(tls_base, certificate):
    """The peer port takes the same CA and client certificate as the client port."""
    crt, key = certificate
    got = E.request(tls_base, "GET", E.PEER_MEMBERS, None, 5, context=E.tls_context(crt, crt, key))
    assert got == {"kind": E.HTTP, "status": 200, "body": json.dumps(peer_list(ONE)), "error": ""}
    refused = E.request(tls_base, "GET", E.PEER_MEMBERS, None, 5, context=E.tls_context(crt))
    assert refused["kind"] == E.BROKEN and E.classify_peer(tls_base, refused)["outcome"] == E.FAULT


def test_tls_failures_are_broken_not_down(tls_base, certificate):
    """A server that cannot be verified, or refuses us, is there: that fails the run instead of counting as a
    cluster not formed yet."""
    crt, _key = certificate
    unverified = E.post(tls_base, E.LIST, {}, 5, context=E.tls_context())
    assert unverified["kind"] == E.BROKEN and "CERTIFICATE_VERIFY_FAILED" in unverified["error"]
    no_client_cert = E.post(tls_base, E.LIST, {}, 5, context=E.tls_context(crt))
    assert no_client_cert["kind"] == E.BROKEN and no_client_cert["status"] is None


def test_tls_context(certificate, tmp_path):
    crt, key = certificate
    context = E.tls_context(crt, crt, key)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any(c["subject"] == ((("commonName", "127.0.0.1"),),) for c in context.get_ca_certs())
    with pytest.raises((OSError, ssl.SSLError)):
        E.tls_context(str(tmp_path / "missing.crt"))
    with pytest.raises((OSError, ssl.SSLError)):
        E.tls_context(crt, str(tmp_path / "missing.crt"), key)
