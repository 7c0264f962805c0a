# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an etcd member with an empty data directory starts a new cluster or joins the existing one, and the
membership change joining takes (the etcd_member module's logic).

etcd reads --initial-cluster-state only while its data directory is empty. A member that has run before but lost its
data must not rejoin under its old entry: the cluster removes that entry and adds the member anew, then the member
starts with the state "existing". Asked through etcd's JSON gRPC gateway (v3.5: POST /v3/cluster/member/list, add,
remove), with the standard library only: the module runs on the node with its system Python.

A member that waits for its quorum (a formed cluster that lost its leader, or a member added and never started) does
not serve its client port at all, but serves its peer port: GET /members there gives the cluster's members as etcd
knows them (etcd's peer handler, the JSON of its membership: [{"id", "name", "peerURLs", "clientURLs"}]). Asked when
no client endpoint serves, unless the caller knows no member has data (first formation).

The decisions (plan) are plain functions of what the other members answered; the I/O (request, ask_members,
ask_peers, apply) is a thin layer over http.client that takes its request function as an argument, so both are
tested without etcd.
"""
from __future__ import annotations

import http.client
import json
import socket
import ssl
from urllib.parse import urlsplit

LIST = "/v3/cluster/member/list"
ADD = "/v3/cluster/member/add"
REMOVE = "/v3/cluster/member/remove"
PEER_MEMBERS = "/members"   # on the peer port: GET, served before the member is ready

# What one request came to
DOWN = "down"        # no connection: refused, unreachable, unresolvable, or the connect timed out
SILENT = "silent"    # connected, but nothing came back within the timeout
BROKEN = "broken"    # connected, then a TLS or protocol failure
HTTP = "http"        # an HTTP answer, whatever its status

# What one endpoint came to, asked for the member list
LISTED = "list"      # the member list
NOBODY = "none"      # no etcd serving there (yet)
FAULT = "error"      # an etcd (or something) answered, but no member list

REGAIN_QUORUM = ("Bring a majority of the etcd members back up (the cluster needs a leader to change its membership), "
                 "then rerun.")


def request(endpoint, method, path, payload, timeout, context=None):
    """``method`` (GET, POST) ``endpoint`` + ``path``, with ``payload`` as JSON unless it is None: {'kind':
    DOWN|SILENT|BROKEN|HTTP, 'status', 'body', 'error'}. http.client, not urllib: no proxy from the environment, and
    the TCP connect is told apart from the answer (a member that is up but not ready accepts connections on its
    client port and answers nothing)."""
    parts = urlsplit(endpoint)
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return {"kind": DOWN, "status": None, "body": "", "error": reason(exc)}
    conn = http.client.HTTPConnection(host, port)  # on sock, which has the timeout; port for the Host header
    try:
        if parts.scheme == "https":
            sock = (context or ssl.create_default_context()).wrap_socket(sock, server_hostname=host)
        conn.sock = sock
        if payload is None:
            conn.request(method, parts.path.rstrip("/") + path)
        else:
            conn.request(method, parts.path.rstrip("/") + path, body=json.dumps(payload),
                         headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        return {"kind": HTTP, "status": resp.status, "body": body, "error": ""}
    except socket.timeout:
        return {"kind": SILENT, "status": None, "body": "", "error": "no answer within %s s" % timeout}
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return {"kind": BROKEN, "status": None, "body": "", "error": reason(exc)}
    finally:
        sock.close()
        conn.close()


def post(endpoint, path, payload, timeout, context=None):
    """POST ``payload`` as JSON to ``endpoint`` + ``path`` (see request)."""
    return request(endpoint, "POST", path, payload, timeout, context=context)


def reason(exc):
    """The text of an OSError or an HTTP exception (its strerror when it has one)."""
    return str(getattr(exc, "strerror", None) or exc) or type(exc).__name__


def tls_context(ca=None, cert=None, key=None):
    """The client side of etcd's TLS: the server verified with ``ca`` (else the system's CAs), ``cert``/``key`` as the
    client certificate when given."""
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context


def endpoint_problems(urls):
    """The URLs that are not http(s)://host[:port][/path], each with why."""
    problems = []
    for url in urls:
        try:
            parts = urlsplit(url)
            usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
        except ValueError as exc:  # a port that is not a number, an unclosed [
            problems.append("%s: %s" % (url, exc))
            continue
        if not usable:
            problems.append("%s: not an http:// or https:// URL with a host" % url)
    return problems


def norm_url(url):
    """A URL as compared: scheme and host lower case, no trailing slash (etcd itself compares peer URLs exactly)."""
    parts = urlsplit(url.strip())
    return "%s://%s%s" % (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"))


def error_text(body):
    """What an error answer says: the gateway's JSON {"error"|"message": ...}, else the body's start."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and (data.get("message") or data.get("error")):
        return str(data.get("message") or data.get("error"))
    text = " ".join(body.split())
    return text[:200] if text else "(empty body)"


def parse_members(body):
    """The members of a member list answer, each {'id', 'name', 'peer_urls', 'client_urls'}: the ID as the gateway
    gave it (a uint64 as a string), the rest empty where the gateway left them out (it omits empty fields). Raises
    ValueError when the body is not a member list."""
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("members"), list) or not data["members"]:
        raise ValueError("no member list in the answer")
    members = []
    for raw in data["members"]:
        if not isinstance(raw, dict) or not str(raw.get("ID")).isdigit():
            raise ValueError("a member without an ID: %r" % (raw,))
        member = {"id": raw["ID"], "name": raw.get("name") or "",
                  "peer_urls": raw.get("peerURLs") or [], "client_urls": raw.get("clientURLs") or []}
        if not all(isinstance(u, str) for u in member["peer_urls"] + member["client_urls"]):
            raise ValueError("a member's URLs are not strings: %r" % (raw,))
        members.append(member)
    return members


def parse_peer_members(body):
    """The members of a peer port's GET /members answer, each as parse_members gives them. etcd writes its membership
    there: a JSON array of {"id", "name", "peerURLs", "clientURLs"}, the ID a number (or, from other writers, a
    string: only names and URLs are used), name and client URLs left out while empty, peerURLs null when empty.
    Raises ValueError when the body is not a member list."""
    data = json.loads(body)
    if not isinstance(data, list) or not data:
        raise ValueError("no member list in the answer")
    members = []
    for raw in data:
        mid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(mid, bool) or not isinstance(mid, (int, str)) or not str(mid).strip():
            raise ValueError("a member without an ID: %r" % (raw,))
        member = {"id": str(mid), "name": raw.get("name") or "",
                  "peer_urls": raw.get("peerURLs") or [], "client_urls": raw.get("clientURLs") or []}
        urls = [member["peer_urls"], member["client_urls"]]
        if not all(isinstance(u, list) and all(isinstance(x, str) for x in u) for u in urls):
            raise ValueError("a member's URLs are not lists of strings: %r" % (raw,))
        if not isinstance(member["name"], str):
            raise ValueError("a member's name is not a string: %r" % (raw,))
        members.append(member)
    return members


def classify(endpoint, answer, again=None):
    """What an endpoint came to: {'endpoint', 'outcome': LISTED|NOBODY|FAULT, 'detail', 'members'}.

    ``answer`` is its answer to the linearizable member list; ``again`` the answer to the same list without
    linearizable, asked only when the first was SILENT. A ready etcd without a leader holds a linearizable read for
    its request timeout (5 s + 2 election timeouts, 7 s by default), longer than ours, but serves its own list at
    once: then the cluster exists and has no quorum. An etcd that is not ready (still forming its cluster) accepts
    connections and answers nothing at all: no cluster yet."""
    out = {"endpoint": endpoint, "outcome": FAULT, "members": []}  # each return says its detail
    kind = answer["kind"]
    if kind == DOWN:
        return dict(out, outcome=NOBODY, detail="no connection: %s" % answer["error"])
    if kind == BROKEN:
        return dict(out, detail="connected, then: %s" % answer["error"])
    if kind == SILENT:
        if again is None or again["kind"] in (DOWN, SILENT):
            return dict(out, outcome=NOBODY, detail="accepts connections but answers nothing (%s): not ready, "
                                                    "waiting for its cluster to form" % answer["error"])
        if again["kind"] == HTTP and again["status"] == 200:
            try:
                parse_members(again["body"])
            except ValueError:
                pass
            else:
                return dict(out, detail="gave no linearizable member list (%s) but its own list at once: it runs "
                                        "without a leader or quorum" % answer["error"])
        return dict(out, detail="gave no linearizable member list (%s); asked without: %s"
                    % (answer["error"], describe(again)))
    if answer["status"] == 200:
        try:
            members = parse_members(answer["body"])
        except ValueError as exc:
            return dict(out, detail="HTTP 200 but %s" % exc)
        return dict(out, outcome=LISTED, detail="%d members" % len(members), members=members)
    return dict(out, detail=describe(answer))


def describe(answer):
    """One answer in words: 'HTTP 503: etcdserver: no leader', or the error of an answer without a status."""
    if answer["kind"] == HTTP:
        return "HTTP %s: %s" % (answer["status"], error_text(answer["body"]))
    return answer["error"]


def ask_members(endpoints, timeout, post_fn=post):
    """Ask the endpoints in order for the member list until one gives it: each one asked, classified (see classify);
    the last is the one that gave the list, if any did."""
    asked = []
    for endpoint in endpoints:
        answer = post_fn(endpoint, LIST, {"linearizable": True}, timeout)
        again = post_fn(endpoint, LIST, {"linearizable": False}, timeout) if answer["kind"] == SILENT else None
        asked.append(classify(endpoint, answer, again))
        if asked[-1]["outcome"] == LISTED:
            break
    return asked


def classify_peer(endpoint, answer):
    """What a peer endpoint came to, asked GET /members: {'endpoint', 'outcome': LISTED|NOBODY|FAULT, 'detail',
    'members'}. etcd serves its peer port at once, ready or not: no connection there is nobody; a port that accepts
    and answers nothing, or answers without a member list, is something (an etcd still starting, a TLS mismatch,
    another server) that gives no list."""
    out = {"endpoint": endpoint, "outcome": FAULT, "members": []}  # each return says its detail
    kind = answer["kind"]
    if kind == DOWN:
        return dict(out, outcome=NOBODY, detail="no connection: %s" % answer["error"])
    if kind == SILENT:
        return dict(out, detail="accepts connections but answers nothing (%s)" % answer["error"])
    if kind == BROKEN:
        return dict(out, detail="connected, then: %s" % answer["error"])
    if answer["status"] == 200:
        try:
            members = parse_peer_members(answer["body"])
        except ValueError as exc:
            return dict(out, detail="HTTP 200 but %s" % exc)
        return dict(out, outcome=LISTED, detail="%d members" % len(members), members=members)
    return dict(out, detail=describe(answer))


def ask_peers(peer_endpoints, timeout, request_fn=request):
    """Ask the peer endpoints in order for GET /members until one gives it: each one asked, classified (see
    classify_peer); the last is the one that gave the list, if any did."""
    asked = []
    for endpoint in peer_endpoints:
        asked.append(classify_peer(endpoint, request_fn(endpoint, "GET", PEER_MEMBERS, None, timeout)))
        if asked[-1]["outcome"] == LISTED:
            break
    return asked


def should_ask(has_data, endpoints, formed):
    """Whether the client endpoints are asked: there are other members, this one has no data, and the caller does
    not know that no member has data (formed False: the cluster forms now, nobody is asked)."""
    return bool(endpoints) and not has_data and formed is not False


def should_ask_peers(has_data, endpoints, formed, answers):
    """Whether the peer endpoints are asked: the client endpoints were asked and nobody serves at any of them (no
    list, no fault), which is a cluster that forms now as much as a formed one without its quorum."""
    return (should_ask(has_data, endpoints, formed) and bool(answers)
            and all(a["outcome"] == NOBODY for a in answers))


def member_text(member):
    return "member %s (%s)" % (member["name"] or "(unnamed, never started)", member["id"])


def plan(has_data, endpoints, answers, name, peer_urls, check_mode, formed=None, peer_answers=()):
    """What to do before etcd starts on this host: {'state': 'new'|'existing'|None, 'changed', 'failed', 'remove':
    [members], 'add': bool, 'actions': [text], 'msg', 'answered_by', 'members'}.

    ``formed`` is what the caller knows: True some member has data, False no member has (first formation: new,
    nobody asked), None not known. ``answers`` are ask_members' results (none when nobody was asked),
    ``peer_answers`` ask_peers' (asked when nobody serves at a client endpoint; see nobody_serves).

    A member of the list is this host's when its peer URLs meet ``peer_urls``; it has run when it has client URLs
    (what etcd publishes when it starts, and what etcd itself checks to refuse a second bootstrap of a member). Ours
    and never run, with exactly our peer URLs: it waits for us, nothing to do. Ours and run before (our data is
    lost), or with other peer URLs, or another member under our name: removed, then we are added."""
    out = {"state": None, "changed": False, "failed": False, "remove": [], "add": False, "actions": [],
           "answered_by": None, "members": []}  # each return says its msg
    if not endpoints:
        return dict(out, state="new", msg="no other members: a cluster of one member starts new")
    if has_data:
        return dict(out, state="existing", msg="the data directory holds this member's data: etcd starts from it "
                                               "and ignores the initial cluster state")
    if formed is False:
        return dict(out, state="new", msg="no member has data (the caller checked every member): the cluster forms "
                                          "now, this member starts it with the others (new); nobody was asked")
    said = said_text(answers)
    listed = [a for a in answers if a["outcome"] == LISTED]
    if not listed:
        if any(a["outcome"] == FAULT for a in answers):
            return dict(out, failed=True, msg="the etcd cluster exists but cannot list or change its membership now "
                                              "(%s). %s" % (said, REGAIN_QUORUM))
        return nobody_serves(out, answers, peer_answers, formed, peer_urls)
    answered = listed[0]
    members = answered["members"]
    out.update(answered_by=answered["endpoint"],
               members=[{"name": m["name"], "peer_urls": list(m["peer_urls"])} for m in members])
    ours = {norm_url(u) for u in peer_urls}
    remove, kept = [], None
    for member in members:
        theirs = {norm_url(u) for u in member["peer_urls"]}
        if theirs & ours:
            if member["client_urls"] or theirs != ours:
                remove.append(member)
            else:
                kept = member
        elif member["name"] == name:
            remove.append(member)
    for member in remove:
        if norm_url(answered["endpoint"]) in {norm_url(u) for u in member["client_urls"]}:
            return dict(out, failed=True, msg="%s would be removed, but it answered at %s itself: it runs, while "
                                              "this host's data directory holds no member data. Nothing was changed. "
                                              "Check data_dir, and that endpoints lists the other members' client "
                                              "URLs only." % (member_text(member), answered["endpoint"]))
    actions = ["removed %s" % member_text(m) for m in remove]
    if kept is None:
        actions.append("added %s" % ",".join(peer_urls))
    if not actions:
        msg = "%s is in the cluster already as %s: it joins the existing cluster" % (name, member_text(kept))
    elif check_mode:
        msg = "check mode, nothing changed; a run would do: %s; then %s joins the existing cluster" % (
            "; ".join(actions), name)
    else:
        msg = "%s; %s joins the existing cluster" % ("; ".join(actions), name)
    return dict(out, state="existing", changed=bool(actions), remove=remove, add=kept is None, actions=actions,
                msg=msg)


def said_text(answers):
    """Each endpoint asked with what it came to: 'url: detail; url: detail'."""
    return "; ".join("%s: %s" % (a["endpoint"], a["detail"]) for a in answers)


def nobody_serves(out, answers, peer_answers, formed, peer_urls):
    """plan when no client endpoint serves: a cluster that forms now, or a formed one waiting for its quorum (a
    member that waits serves only its peer port). The first peer member list decides: this member in it with
    exactly its peer URLs and never started (no client URLs: added, or an initial member of a cluster that forms
    now) starts "existing"; a list without it is a cluster that cannot change its membership now. Without a list:
    the caller's word that a member has data fails the run (its members are down), a peer port that answered
    without a list fails it too (something is there), else the cluster forms now."""
    said = said_text(list(answers) + list(peer_answers))
    lists = [a for a in peer_answers if a["outcome"] == LISTED]
    if lists:
        peer = lists[0]
        members = peer["members"]
        out = dict(out, answered_by=peer["endpoint"],
                   members=[{"name": m["name"], "peer_urls": list(m["peer_urls"])} for m in members])
        ours = {norm_url(u) for u in peer_urls}
        mine = [m for m in members if {norm_url(u) for u in m["peer_urls"]} & ours]
        waiting = [m for m in mine if {norm_url(u) for u in m["peer_urls"]} == ours and not m["client_urls"]]
        if waiting:
            return dict(out, state="existing", msg=(
                "no member serves its client API (%s), but the peer %s lists %s with this member's peer URLs, never "
                "started: the cluster waits for it (it was added, or is an initial member of a cluster that forms "
                "now); it joins the existing cluster" % (said, peer["endpoint"], member_text(waiting[0]))))
        if not mine:
            why = "this member (peer URLs %s) is not in it" % ",".join(peer_urls)
        elif mine[0]["client_urls"]:
            why = "it lists this member's peer URLs as %s, which ran before (its data here is lost)" % (
                member_text(mine[0]))
        else:
            why = "it lists %s with peer URLs %s, not exactly this member's (%s)" % (
                member_text(mine[0]), ",".join(mine[0]["peer_urls"]), ",".join(peer_urls))
        return dict(out, failed=True, msg=(
            "the etcd cluster exists (the peer %s lists %d members) but no member serves its client API now, so its "
            "membership cannot change; %s. Asked: %s. %s" % (peer["endpoint"], len(members), why, said,
                                                             REGAIN_QUORUM)))
    if formed:
        return dict(out, failed=True, msg=(
            "the caller says a member has data (the cluster has formed), yet no member gives its member list on its "
            "client or peer port (%s): start the etcd members (systemctl start) first, then rerun."
            % (said + ("" if peer_answers else "; no peer endpoints to ask"))))
    if any(a["outcome"] == FAULT for a in peer_answers):
        return dict(out, failed=True, msg=(
            "no other member serves its client API, and a peer port answered without a member list (%s): whether "
            "the cluster has formed cannot be told. Nothing was changed. Check the peer URLs and TLS files, or start "
            "the etcd members, then rerun." % said))
    return dict(out, state="new", msg="no other member serves yet (%s): the cluster has not formed, this member "
                                      "starts it with the others (new)" % said)


def apply(decision, peer_urls, timeout, post_fn=post):
    """Carry out a plan through the endpoint that answered: its removals, then the addition. Returns (the actions
    done, None) or (the actions done, why it stopped)."""
    endpoint = decision["answered_by"]
    done = []
    for member in decision["remove"]:
        answer = post_fn(endpoint, REMOVE, {"ID": member["id"]}, timeout)
        if answer["kind"] != HTTP or answer["status"] != 200:
            return done, "removing %s through %s failed: %s. %s" % (
                member_text(member), endpoint, describe(answer), changed_so_far(done, answer))
        done.append("removed %s" % member_text(member))
    if decision["add"]:
        answer = post_fn(endpoint, ADD, {"peerURLs": list(peer_urls)}, timeout)
        if answer["kind"] != HTTP or answer["status"] != 200:
            return done, "adding %s through %s failed: %s. %s" % (
                ",".join(peer_urls), endpoint, describe(answer), changed_so_far(done, answer))
        done.append("added %s" % ",".join(peer_urls))
    return done, None


def changed_so_far(done, answer):
    """The end of a failed apply's message: what was changed before, whether the failed change may still take
    effect, and that a rerun starts from the cluster as it is then."""
    text = "Done before: %s. " % "; ".join(done) if done else "Nothing was changed before. "
    if answer["kind"] in (SILENT, BROKEN):
        text += "Without an answer, the failed change may still take effect. "
    return text + "A rerun starts from the member list as it is then."
