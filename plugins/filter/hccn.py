# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

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
