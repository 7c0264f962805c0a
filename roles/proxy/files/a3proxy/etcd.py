# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy).
"""etcd: where the wrapper reads the openYuanrong datasystem workers' registrations (one etcd, or the members of an
etcd cluster: whichever answers), over http or https with a client certificate, and what those registrations
say."""

import base64
import collections
import re
import ssl

DS_PREFIX = "/datasystem/cluster/"
_DS_READY = re.compile(r"^[^;]*;ready(;|$)")
_HOSTPORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")

EtcdEndpoint = collections.namedtuple("EtcdEndpoint", "scheme host port base_url")


def parse_etcd_address(text):
    """An EtcdEndpoint from "host:port", "http://host:port" or "https://host:port" ([v6]:port too). Raises
    ValueError saying what is wrong."""
    value = (text or "").strip()
    scheme = "http"
    for prefix in ("http://", "https://"):
        if value.lower().startswith(prefix):
            scheme, value = prefix[:-3], value[len(prefix):]
            break
    value = value.rstrip("/")
    match = _HOSTPORT.match(value)
    if not match or not 1 <= int(match.group(2)) <= 65535:
        raise ValueError("--a3-etcd must be host:port, http://host:port or https://host:port, got %r" % text)
    host = match.group(1)
    return EtcdEndpoint(scheme, host.strip("[]"), int(match.group(2)), "%s://%s:%s" % (scheme, host, match.group(2)))


class EtcdEndpoints(tuple):
    """The EtcdEndpoint of every address of --a3-etcd, in its order (one at least, all of one scheme): the read
    takes whichever answers."""
    __slots__ = ()

    @property
    def scheme(self):
        return self[0].scheme

    @property
    def hosts(self):
        return [endpoint.host for endpoint in self]

    @property
    def base_url(self):
        """The base URL of a single endpoint; of several, their base URLs comma-separated (for the logs)."""
        return ",".join(endpoint.base_url for endpoint in self)


def parse_etcd_addresses(text):
    """The EtcdEndpoints of --a3-etcd: one address as parse_etcd_address reads it, or a comma-separated list of them
    (the members of an etcd cluster), all of one scheme, none twice. Raises ValueError naming the bad item."""
    items = (text or "").split(",")
    if len(items) == 1:
        return EtcdEndpoints([parse_etcd_address(text)])
    endpoints = []
    for item in items:
        try:
            endpoint = parse_etcd_address(item)
        except ValueError as exc:
            raise ValueError("%s (in --a3-etcd %s)" % (exc, text))
        for seen in endpoints:
            if (seen.host.lower(), seen.port) == (endpoint.host.lower(), endpoint.port):
                raise ValueError("--a3-etcd names %s twice (%s)" % (endpoint.base_url, text))
            if seen.scheme != endpoint.scheme:
                raise ValueError("--a3-etcd mixes http and https (%s and %s): every member is read the same way"
                                 % (seen.base_url, endpoint.base_url))
        endpoints.append(endpoint)
    return EtcdEndpoints(endpoints)


def try_order(endpoints, last_good=None):
    """The indexes of endpoints in the order a read tries them: the one that answered last (last_good) first, then
    the others in their order."""
    order = list(range(len(endpoints)))
    if last_good in order:
        order.remove(last_good)
        order.insert(0, last_good)
    return order


def read_failure_text(failures):
    """What the logs say of a read's failed attempts: failures is [(endpoint, what went wrong)] in the order they
    were tried; one endpoint's is its text alone, several name each."""
    if len(failures) == 1:
        return failures[0][1]
    return "; ".join("%s: %s" % (endpoint.base_url, text) for endpoint, text in failures)


def check_etcd_options(address, ca, cert, key):
    """The EtcdEndpoints of --a3-etcd (None without it) after checking the TLS options fit: the certificate and
    its key come together, and TLS files need https. Raises ValueError."""
    tls_files = [name for name, value in (("--a3-etcd-ca", ca), ("--a3-etcd-cert", cert), ("--a3-etcd-key", key))
                 if value]
    if not address:
        if tls_files:
            raise ValueError("%s without --a3-etcd" % ", ".join(tls_files))
        return None
    endpoints = parse_etcd_addresses(address)
    if bool(cert) != bool(key):
        raise ValueError("--a3-etcd-cert and --a3-etcd-key go together (the client certificate and its key)")
    if tls_files and endpoints.scheme != "https":
        raise ValueError("%s need an https:// etcd address (--a3-etcd %s)" % (", ".join(tls_files), address))
    return endpoints


def etcd_ssl_context(ca=None, cert=None, key=None):
    """The TLS context of the etcd client: the server checked against ca (the system's CAs without it), the
    client certificate presented when given. Raises OSError/ssl.SSLError for unreadable files."""
    context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    if cert:
        context.load_cert_chain(cert, key)
    return context


def ds_range_request():
    """The body of etcd's POST /v3/kv/range for every key under DS_PREFIX (keys are base64 in the gateway)."""
    return {"key": base64.b64encode(DS_PREFIX.encode()).decode(),
            "range_end": base64.b64encode(DS_PREFIX[:-1].encode() + b"0").decode()}


def ds_worker_states(answer, expected):
    """{worker: 1 or 0} for every expected worker address from an etcd /v3/kv/range answer (parsed JSON): 1 when
    its key /datasystem/cluster/<worker> exists with a value "<ts>;ready[;...]" (a worker registers first and
    answers "Worker not ready" until its state reaches ready), else 0. Registered workers nobody expects are
    added too (the pool may hold more members than this deployment's)."""
    states = {worker: 0 for worker in expected}
    for kv in (answer or {}).get("kvs") or []:
        key = base64.b64decode(kv.get("key", "")).decode("utf-8", "replace")
        if not key.startswith(DS_PREFIX):
            continue
        value = base64.b64decode(kv.get("value", "")).decode("utf-8", "replace")
        states[key[len(DS_PREFIX):]] = 1 if _DS_READY.search(value) else 0
    return states
