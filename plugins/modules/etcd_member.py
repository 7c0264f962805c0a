#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_member
short_description: Decide how an etcd cluster member starts, and rejoin it after its data was lost
description:
  - Run on each member of a multi-member etcd cluster before etcd starts or restarts there. Returns the
    RV(initial_cluster_state) etcd must start with (C(ETCD_INITIAL_CLUSTER_STATE)), which etcd reads only while
    its data directory is empty, and makes the membership change a member with an empty data directory needs.
  - Without other members (O(endpoints) empty) the state is always C(new). With member data in O(data_dir) (the
    directory C(<data_dir>/member) exists) it is C(existing), which etcd ignores then. With O(formed=false) (the
    caller checked every member and none has data) it is C(new). None of these asks anything.
  - Otherwise the other members are asked in turn for the member list through etcd's JSON gRPC gateway
    (C(POST /v3/cluster/member/list), linearizable), until one gives it.
  - When a member gives the list, the state is C(existing). The list's entry with this host's peer URLs that has
    never started (no client URLs; added, or listed in the initial cluster) waits for this host; nothing to do. An
    entry with this host's peer URLs that has run before (its data here is lost), or with partly other peer URLs,
    or another entry under this member's O(name), is removed; then this host's peer URLs are added
    (C(/v3/cluster/member/remove), C(/v3/cluster/member/add)).
  - Fails, changing nothing, when members answer but none gives the list (no leader or no quorum, or an error);
    the message names each endpoint and what it answered. A ready etcd without a leader holds a linearizable read
    for its request timeout (7 s with the default election timeout), longer than O(timeout)'s default; an endpoint
    that gives no answer in time is asked once more for its own (not linearizable) list, which such a member serves
    at once.
  - When no other member serves its client API (every connection refused or unanswered), that is a cluster that
    forms now as much as a formed one without its quorum. A member that is not ready (waiting for its cluster to
    form, or for its quorum) accepts connections on its client port and answers nothing, but serves its peer port.
    So the other members' peer ports (O(peer_endpoints)) are asked in turn for their member list
    (C(GET /members), which etcd serves before it is ready), until one gives it.
  - A peer member list with an entry of exactly this host's peer URLs that never started (no client URLs; it was
    added, or is an initial member of a cluster that forms now) gives the state C(existing), changing nothing. A
    peer member list without such an entry (not listed, or listed as started before, so its data here is lost) fails
    the run, since the cluster exists but cannot change its membership without a leader.
  - When no peer port gives a list either, with O(formed=true) the run fails (a member has data, yet none answers;
    start the members first); when a peer port answered without a list it fails too (whether the cluster has formed
    cannot be told); otherwise the cluster has not formed yet and the state is C(new).
  - Fails, changing nothing, when the entry to remove answered as one of O(endpoints) itself (it runs, yet this
    host has no member data; a wrong O(data_dir), or this member's own client URL among O(endpoints)).
  - Requests go through Python's standard library (no proxy from the environment).
version_added: 1.1.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  name:
    description: This member's etcd C(--name).
    type: str
    required: true
  peer_urls:
    description: This member's advertised peer URLs (C(--initial-advertise-peer-urls)).
    type: list
    elements: str
    required: true
  endpoints:
    description:
      - The client URLs of the B(other) members, asked in this order.
      - Empty for a cluster of one member, which always starts C(new).
    type: list
    elements: str
    required: true
  peer_endpoints:
    description:
      - The peer URLs of the B(other) members (for example C(http://127.30.0.11:2380)), in the order of
        O(endpoints), one for each; asked for their member list only when no client endpoint serves.
      - Empty asks no peer port (then nobody serving at a client endpoint means C(new), unless O(formed=true)).
    type: list
    elements: str
    default: []
  formed:
    description:
      - What the caller knows about the members' data. V(true) some member has data (the cluster has formed);
        V(false) every member was checked and none has data (first formation; the state is C(new) and nobody is asked).
      - Omitted when not known (for example some members are not in the play).
    type: bool
  data_dir:
    description: etcd's C(--data-dir) on this host; it holds member data when C(<data_dir>/member) exists.
    type: path
    required: true
  ca:
    description:
      - CA bundle that verifies the members' server certificates at https endpoints (else the system's CAs).
      - Used for https O(peer_endpoints) too.
    type: path
  cert:
    description:
      - Client certificate for https endpoints (etcd's C(--client-cert-auth)); with O(key).
      - Used for https O(peer_endpoints) too (etcd's C(--peer-client-cert-auth)).
    type: path
  key:
    description: Private key of O(cert).
    type: path
  timeout:
    description: Seconds each request may take (connect, then answer).
    type: float
    default: 5
attributes:
  check_mode:
    support: full
    description: Asks the members in check mode too; reports the changes it would make and makes none.
  diff_mode:
    support: none
    description: Nothing to diff.
notes:
  - Changes the membership through the first endpoint that gave the list. If a removal succeeds and the addition
    fails, the module fails saying so; a rerun finds no entry for this host and adds it.
"""

EXAMPLES = r"""
- name: Decide how etcd starts here (rejoining the cluster if this member lost its data)
  ascend.vllm_pd.etcd_member:
    name: etcd-2
    peer_urls: [http://127.30.0.12:2380]
    endpoints: [http://127.30.0.11:2379, http://127.30.0.13:2379]
    data_dir: /var/lib/ascend-etcd
  register: etcd_join

- name: Grow a cluster whose members may wait for their quorum (they serve their peer port only)
  ascend.vllm_pd.etcd_member:
    name: etcd-2
    peer_urls: [http://127.30.0.12:2380]
    endpoints: [http://127.30.0.11:2379]
    peer_endpoints: [http://127.30.0.11:2380]
    formed: true  # the caller saw member data on etcd-1
    data_dir: /var/lib/ascend-etcd
  register: etcd_join

- name: First formation (the caller saw no member data anywhere), nobody asked
  ascend.vllm_pd.etcd_member:
    name: etcd-2
    peer_urls: [http://127.30.0.12:2380]
    endpoints: [http://127.30.0.11:2379, http://127.30.0.13:2379]
    formed: false
    data_dir: /var/lib/ascend-etcd
  register: etcd_join

- name: With client certificates (the same for the peer ports)
  ascend.vllm_pd.etcd_member:
    name: etcd-2
    peer_urls: [https://10.0.0.12:2380]
    endpoints: [https://10.0.0.11:2379, https://10.0.0.13:2379]
    peer_endpoints: [https://10.0.0.11:2380, https://10.0.0.13:2380]
    data_dir: /var/lib/ascend-etcd
    ca: /etc/ascend-etcd/tls/ca.crt
    cert: /etc/ascend-etcd/tls/client.crt
    key: /etc/ascend-etcd/tls/client.key
  register: etcd_join

# then ETCD_INITIAL_CLUSTER_STATE={{ etcd_join.initial_cluster_state }} in etcd's environment file
"""

RETURN = r"""
initial_cluster_state:
  description: What etcd starts with while its data directory is empty, C(new) or C(existing).
  returned: success
  type: str
  sample: existing
actions:
  description: The membership changes made (in check mode, the ones a run would make), in order.
  returned: always
  type: list
  elements: str
  sample: ["removed member etcd-2 (10501334649042878790)", "added http://127.30.0.12:2380"]
members:
  description:
    - The member list the cluster gave (through a client endpoint, or a peer endpoint when no client endpoint
      served), before any change; empty when no member gave one.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The member's name; empty for a member added but never started.
      type: str
    peer_urls:
      description: The member's peer URLs.
      type: list
      elements: str
answered_by:
  description:
    - The endpoint that gave the member list, a client endpoint or (when no client endpoint served) a peer endpoint;
      null when none did or none was asked.
  returned: always
  type: str
  sample: http://127.30.0.11:2379
asked:
  description: Each endpoint asked, in order, with what it answered; the client endpoints, then any peer endpoints.
  returned: always
  type: list
  elements: str
  sample: ["http://127.30.0.11:2379: no connection: Connection refused", "http://127.30.0.11:2380: 2 members"]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._etcd_member import (
    apply, ask_members, ask_peers, endpoint_problems, plan, request, should_ask, should_ask_peers, tls_context)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            peer_urls=dict(type="list", elements="str", required=True),
            endpoints=dict(type="list", elements="str", required=True),
            peer_endpoints=dict(type="list", elements="str", default=[]),
            formed=dict(type="bool"),
            data_dir=dict(type="path", required=True),
            ca=dict(type="path"),
            cert=dict(type="path"),
            key=dict(type="path", no_log=False),
            timeout=dict(type="float", default=5),
        ),
        required_together=[("cert", "key")],
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, actions=[], members=[], answered_by=None, asked=[])
    bad = endpoint_problems(p["peer_urls"] + p["endpoints"] + p["peer_endpoints"])
    if not p["peer_urls"] or bad:
        module.fail_json(msg="peer_urls must name at least one URL, and every URL must be http(s)://host:port: %s"
                             % ("; ".join(bad) or "peer_urls is empty"), **result)
    if p["peer_endpoints"] and len(p["peer_endpoints"]) != len(p["endpoints"]):
        module.fail_json(msg="peer_endpoints must name one peer URL for each of endpoints, in the same order (%d "
                             "endpoints, %d peer_endpoints), or none" % (len(p["endpoints"]),
                                                                         len(p["peer_endpoints"])), **result)
    has_data = os.path.isdir(os.path.join(p["data_dir"], "member"))
    asking = should_ask(has_data, p["endpoints"], p["formed"])
    context = None
    if asking and any(url.lower().startswith("https:") for url in p["endpoints"] + p["peer_endpoints"]):
        try:
            context = tls_context(p["ca"], p["cert"], p["key"])
        except (OSError, ValueError) as exc:
            module.fail_json(msg="cannot load the TLS files (ca %s, cert %s, key %s): %s"
                                 % (p["ca"], p["cert"], p["key"], exc), **result)

    def request_tls(endpoint, method, path, payload, timeout):
        return request(endpoint, method, path, payload, timeout, context=context)

    def post_tls(endpoint, path, payload, timeout):
        return request_tls(endpoint, "POST", path, payload, timeout)

    answers, peer_answers = [], []
    if asking:
        answers = ask_members(p["endpoints"], p["timeout"], post_fn=post_tls)
    if should_ask_peers(has_data, p["endpoints"], p["formed"], answers):
        peer_answers = ask_peers(p["peer_endpoints"], p["timeout"], request_fn=request_tls)
    result["asked"] = ["%s: %s" % (a["endpoint"], a["detail"]) for a in answers + peer_answers]
    decision = plan(has_data, p["endpoints"], answers, p["name"], p["peer_urls"], check_mode=module.check_mode,
                    formed=p["formed"], peer_answers=peer_answers)
    result.update(members=decision["members"], answered_by=decision["answered_by"])
    if decision["failed"]:
        module.fail_json(msg=decision["msg"], **result)
    if decision["changed"] and not module.check_mode:
        done, error = apply(decision, p["peer_urls"], p["timeout"], post_fn=post_tls)
        if error:
            result.update(changed=bool(done), actions=done)
            module.fail_json(msg=error, **result)
    result.update(changed=decision["changed"], actions=decision["actions"])
    module.exit_json(msg=decision["msg"], initial_cluster_state=decision["state"], **result)


if __name__ == "__main__":
    main()
