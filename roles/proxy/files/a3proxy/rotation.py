# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""Drain and selection around the upstream's rotation, and the bookkeeping of the upstream's load counters.

The upstream (v0.18.0) books a score on a server when it selects it (active_tokens, and for a prefill
active_kv_cache too) and releases it on its success path only: a request whose prefill failed, a stream cut
short, a first-byte timeout, a client gone, a backend's 4xx, or its own "recomputed" retry (which selects a new
pair and never releases the first decode) leave the counts above zero for good, and the least-load selection
then avoids a backend that is idle. LoadLedger keeps, per client request, what the upstream booked on which
server object and what it released; what is left when the request ends is released then.
"""

from .health import backend_key

KINDS = ("tokens", "kv")


def parse_backend_list(body, known):
    """The backends a POST /a3/drain or /a3/undrain names: body is the request's bytes, a JSON object
    {"backends": ["host:port", ...]}; known: the backend keys the proxy has. Returns the list, or raises
    ValueError with what is wrong and what the proxy knows."""
    from .answers import json_or_none
    data = json_or_none(body)
    names = data.get("backends") if isinstance(data, dict) else None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError('the body must be a JSON object {"backends": ["host:port", ...]} with at least one backend')
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError("unknown backend%s %s: the proxy has %s" % ("s" if len(unknown) > 1 else "",
                         ", ".join(unknown), ", ".join(sorted(set(known))) or "none"))
    return sorted(set(names))


def choose_undrained(servers, drained, tainted, role):
    """The index in servers (the upstream's prefillers or decoders list, ServerState objects) of the least
    loaded server that is neither drained ("host:port" in drained) nor tainted (marked for removal by the
    upstream), by the upstream's own priority (active tokens, plus 0.3 x the KV cache held for prefill);
    ties go to the lower index. None when every server is drained or tainted.

    Chosen from the list, not from the upstream's heap: the index is what the upstream uses to look the
    server up, and the heap's entries stop matching the list's positions once backends have been removed
    and added back (its removal runs in another thread than its selection)."""
    best = None
    for index, server in enumerate(servers):
        if backend_key(server.host, server.port) in drained or any(server is t for t in tainted):
            continue
        load = float(server.active_tokens or 0)
        if role == "prefill":
            load += 0.3 * float(server.active_kv_cache or 0)
        if best is None or load < best[0]:
            best = (load, index)
    return None if best is None else best[1]


def outstanding_load(server, role):
    """The work the upstream still counts on a server (ServerState): its active tokens, and for a prefill
    the KV cache decode has not pulled yet."""
    load = float(server.active_tokens or 0)
    if role == "prefill":
        load += float(server.active_kv_cache or 0)
    return load


def index_of(servers, server):
    """The position of this very object in servers (the upstream's list), None when it left the list."""
    for index, candidate in enumerate(servers):
        if candidate is server:
            return index
    return None


class LoadLedger(object):
    """What the upstream booked for one client request (book) and released (release), per server object.

    release() answers which server a release of the upstream is for: the latest booking of that role with
    something left of that kind (the upstream releases the pair it selected last; an index it passes may point
    elsewhere once servers left the list), never more than was booked. settle() hands back what is left and
    zeroes it, so a release arriving after it finds nothing: no count is released twice.
    """

    def __init__(self):
        self.entries = []

    def book(self, role, server, tokens, kv=0.0):
        entry = {"role": role, "server": server, "tokens": float(tokens), "kv": float(kv)}
        self.entries.append(entry)
        return entry

    def release(self, role, kind, amount):
        """(server, amount to release) for the upstream's release of amount of kind ("tokens" or "kv") on a
        server of role; (None, 0.0) when nothing of that kind is left in this request."""
        if kind not in KINDS:
            raise ValueError("kind must be one of %s, got %r" % (KINDS, kind))
        for entry in reversed(self.entries):
            if entry["role"] == role and entry[kind] > 0:
                taken = min(float(amount), entry[kind])
                entry[kind] -= taken
                return entry["server"], taken
        return None, 0.0

    def settle(self):
        """[(role, server, tokens left, kv left)] of every booking with something left, in booking order;
        the ledger holds nothing afterwards."""
        left = []
        for entry in self.entries:
            if entry["tokens"] > 0 or entry["kv"] > 0:
                left.append((entry["role"], entry["server"], entry["tokens"], entry["kv"]))
                entry["tokens"] = entry["kv"] = 0.0
        return left

    def backends(self):
        """The "host:port" of every server this request booked (released or not)."""
        return set(backend_key(e["server"].host, e["server"].port) for e in self.entries)
