# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: hccn_peer_map
short_description: Cross-node NPU network helpers (hccs_ping peers, TLS consistency, failure text)
description:
  - Controller-side companions of the M(ascend.vllm_pd.hccn_check) module, which sees one node only. This file
    provides three filters (ansible-doc shows this page for each of them).
  - "C(hccn_peer_map): the vNIC IPs each local NPU device must C(hccs_ping), built from every node's first
    C(hccn_check) pass. Input: C({node: result}) where a result is a registered C(hccn_check) result (its
    C(vnic_ips) map or its C(devices) list) or a plain C({device: vnic_ip}) map. Output: C({device: [ip, ...]})
    for O(self_node), the C(peers) option of the second pass. Devices without an IP (vNIC down) are skipped:
    their own vNIC check fails on their node."
  - "C(hccn_compare_tls): the TLS switch (C(hccn_tool -i N -tls -g | grep switch)) must be identical across
    nodes. Input: C({node: result}) (the C(tls) map of each node's C(hccn_check) result, or a C({device: switch})
    map). Output: a list of failures, empty when consistent; each failure names the node, the device, what was
    seen, what was expected and the command to reproduce it (keys C(node), C(device), C(check), C(seen),
    C(expected), C(command), C(msg))."
  - "C(hccn_failure_message): one line listing every failure of one node (C(hccn_check) C(failures) and/or
    C(hccn_compare_tls) entries), each with the device, the check, what was seen and the command to reproduce it,
    followed by what to do per check. Empty string when there are none."
  - The filters run on the controller and only read their input.
positional: _input
options:
  _input:
    description:
      - "C(hccn_peer_map) and C(hccn_compare_tls) take C({node: hccn_check result or device map}), every node of
        the play (C(hccn_compare_tls) compares exactly the nodes given)."
      - C(hccn_failure_message) takes a list of failures.
    type: raw
    required: true
  mode:
    description:
      - C(hccn_peer_map) only. V(same_index) pings device N of every other node from device N (the seed's
        C(for i in {0..15}) loop, 3 peers per device on 4 nodes); V(all_pairs) pings every device of every other
        node (48 peers per device on 4 nodes, for deep diagnosis).
    type: str
    choices: [same_index, all_pairs]
    default: same_index
  self_node:
    description:
      - C(hccn_peer_map) only. The node whose peers are wanted (usually C(inventory_hostname)); its own IPs are
        never its peers. Without it every node of the input is a peer.
    type: str
  scope:
    description:
      - C(hccn_compare_tls) only. V(all) every device of every node must carry the same switch (any device may
        talk to any device across prefill and decode); V(device) device N must match device N on the other nodes
        (the checklist's minimum).
    type: str
    choices: [all, device]
    default: all
  tool:
    description:
      - C(hccn_compare_tls) only. The C(hccn_tool) path shown in the reproduce command.
    type: str
    default: hccn_tool
  node:
    description:
      - C(hccn_failure_message) only. Node name to start the message with (none by default).
    type: str
  hints:
    description:
      - C(hccn_failure_message) only. Append what to do for each failing check.
    type: bool
    default: true
  peer_names:
    description:
      - "C(hccn_failure_message) only. C({vNIC IP: name}), e.g. C({'127.31.0.8': 'p0 device 7'}): a failed
        C(hccs_ping) then names the peer C(to p0 device 7 (127.31.0.8)) instead of its IP alone."
    type: dict
  option_prefix:
    description:
      - "C(hccn_failure_message) only. Prefix of the role variables named in the hints (V(preflight_) turns
        C(set strict_link=false) into C(set preflight_strict_link: false))."
    type: str
    default: ""
seealso:
  - module: ascend.vllm_pd.hccn_check
"""

EXAMPLES = r"""
# First pass registered as hccn_pass1 on every node of the play; second pass peers of this node:
hccn_peers: >-
  {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'hccn_pass1')))
     | ascend.vllm_pd.hccn_peer_map(mode='same_index', self_node=inventory_hostname) }}
# -> {0: ['127.31.1.1', '127.31.2.1', '127.31.3.1'], 1: [...], ...}

# Compare TLS across every node (run_once); [] when consistent:
tls_failures: >-
  {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'hccn_pass1')))
     | ascend.vllm_pd.hccn_compare_tls(scope='all') }}
# -> [{node: d1, device: 0, check: tls, seen: 1, expected: 0, command: 'hccn_tool -i 0 -tls -g | grep switch',
#      msg: 'node d1 device 0: tls switch 1, expected 0 like the others (values seen: 0 on 63, 1 on 1) ...'}]

# One line for every failing device of this node:
msg: "{{ hccn_pass1.failures + my_tls_failures | ascend.vllm_pd.hccn_failure_message(node=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description:
    - "C(hccn_peer_map) a dict C({device: [peer vNIC IP, ...]}) (integer device ids)."
    - C(hccn_compare_tls) a list of failure dicts (empty when the switch is consistent).
    - C(hccn_failure_message) a string (empty when there is no failure).
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    PEER_MODES,
    TLS_SCOPES,
    compare_tls,
    failure_message,
    peer_map,
)


def _results(value, name):
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s: the input must be a dict {node: hccn_check result or {device: value}}, got %s"
                                 % (name, type(value).__name__))
    # hosts whose first pass did not run (skipped, unreachable) carry no result: leave them out
    return dict((node, result) for node, result in value.items() if result not in (None, '', {}))


def hccn_peer_map(node_results, mode="same_index", self_node=None):
    """Peers per local device; see _hccn.peer_map."""
    if mode not in PEER_MODES:
        raise AnsibleFilterError("hccn_peer_map: mode must be one of %s, got %r" % (", ".join(PEER_MODES), mode))
    try:
        peers = peer_map(_results(node_results, "hccn_peer_map"), mode=mode, self_node=self_node)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("hccn_peer_map: cannot read the nodes' vNIC IPs (%s: %s); give each node's "
                                 "registered hccn_check result or a {device: ip} map" % (type(exc).__name__, exc))
    return dict((int(device), list(ips)) for device, ips in peers.items())


def hccn_compare_tls(per_node, scope="all", tool="hccn_tool"):
    """TLS consistency failures across nodes; see _hccn.compare_tls."""
    if scope not in TLS_SCOPES:
        raise AnsibleFilterError("hccn_compare_tls: scope must be one of %s, got %r" % (", ".join(TLS_SCOPES), scope))
    try:
        failures = compare_tls(_results(per_node, "hccn_compare_tls"), scope=scope, tool=tool)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("hccn_compare_tls: cannot read the nodes' TLS switches (%s: %s); give each "
                                 "node's registered hccn_check result or a {device: switch} map"
                                 % (type(exc).__name__, exc))
    return [dict(f) for f in failures]


def _readable(failure, peer_names=None):
    """hccn_check failures pass through (a hccs_ping peer IP gets its node/device name when known);
    a compare_tls failure gets a 'seen' sentence."""
    f = dict(failure)
    peer = f.get("peer")
    if peer and peer_names and peer in peer_names and isinstance(f.get("seen"), str):
        f["seen"] = f["seen"].replace("to %s:" % peer, "to %s (%s):" % (peer_names[peer], peer), 1)
    if f.get("check") == "tls" and "expected" in f:
        if f.get("seen") is None:
            f["seen"] = "tls switch could not be read"
        else:
            f["seen"] = "tls switch %s, but the other devices/nodes have %s (%s)" % (
                f["seen"], f["expected"], "1 = enable, 0 = disable")
    for key in ("device", "check", "seen", "command"):
        f.setdefault(key, "?")
    return f


def hccn_failure_message(failures, node=None, hints=True, option_prefix="", peer_names=None):
    """One line naming every failing device of a node, with what to do; '' when there is none."""
    if not failures:
        return ""
    if not isinstance(failures, (list, tuple)):
        raise AnsibleFilterError("hccn_failure_message: the input must be a list of failures, got %s"
                                 % type(failures).__name__)
    if peer_names is not None and not isinstance(peer_names, dict):
        raise AnsibleFilterError("hccn_failure_message: peer_names must be a dict {ip: name}, got %s"
                                 % type(peer_names).__name__)
    items = sorted((_readable(f, peer_names) for f in failures),
                   key=lambda f: (f["device"] if isinstance(f["device"], int) else 10 ** 6, str(f["check"])))
    msg = failure_message(items, hints=hints)
    prefix = "%d NPU network check(s) failed on this node: " % len(items)
    if msg.startswith(prefix):
        msg = msg[len(prefix):]
    if option_prefix:
        for option in ("strict_link", "strict_net_health"):
            msg = msg.replace("set %s=false" % option, "set %s%s: false" % (option_prefix, option))
    devices = []
    for f in items:
        if f["device"] not in devices:
            devices.append(f["device"])
    return "%s%d NPU network check(s) failed on %d device(s) [%s]: %s" % (
        ("%s: " % node) if node else "", len(items), len(devices), ", ".join(str(d) for d in devices), msg)


class FilterModule:
    def filters(self):
        return {
            "hccn_peer_map": hccn_peer_map,
            "hccn_compare_tls": hccn_compare_tls,
            "hccn_failure_message": hccn_failure_message,
        }
