# -*- coding: utf-8 -*-
"""a3proxy.etcd: the etcd address (http, or https with a client certificate) and the workers' registrations."""
from __future__ import annotations

import base64
import ssl
import subprocess
import shutil

import pytest
from a3proxy import etcd as e


@pytest.mark.parametrize("text, scheme, host, port, url", [
    ("10.0.0.1:2379", "http", "10.0.0.1", 2379, "http://10.0.0.1:2379"),
    ("http://10.0.0.1:2379/", "http", "10.0.0.1", 2379, "http://10.0.0.1:2379"),
    ("https://etcd-0.local:2379", "https", "etcd-0.local", 2379, "https://etcd-0.local:2379"),
    ("HTTPS://[fd00::1]:2379", "https", "fd00::1", 2379, "https://[fd00::1]:2379"),
])
def test_parse_etcd_address(text, scheme, host, port, url):
    assert e.parse_etcd_address(text) == (scheme, host, port, url)


@pytest.mark.parametrize("text", ["", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:99999", "ftp://h:1", "https://h", "h:1/x",
                                  "fd00::1:2379"])
def test_parse_etcd_address_refuses(text):
    with pytest.raises(ValueError, match="--a3-etcd must be"):
        e.parse_etcd_address(text)


def test_check_etcd_options():
    assert e.check_etcd_options(None, None, None, None) is None
    assert e.check_etcd_options("https://h:1", "ca", "c", "k").scheme == "https"
    assert e.check_etcd_options("https://h:1", None, None, None).scheme == "https"  # the system's CAs
    for args, text in [((None, "ca", None, None), "without --a3-etcd"),
                       (("h:1", "ca", None, None), "need an https:// etcd address"),
                       (("https://h:1", None, "c", None), "go together"),
                       (("https://h:1", "ca", None, "k"), "go together")]:
        with pytest.raises(ValueError, match=text):
            e.check_etcd_options(*args)


# ----------------------------------------------------------------------------- a list of members (an etcd cluster)

def test_one_address_is_one_endpoint_as_before():
    endpoints = e.parse_etcd_addresses(" https://etcd-1:2379/ ")
    assert isinstance(endpoints, e.EtcdEndpoints) and endpoints == (e.parse_etcd_address("https://etcd-1:2379"),)
    assert (endpoints.scheme, endpoints.hosts, endpoints.base_url) == ("https", ["etcd-1"], "https://etcd-1:2379")


@pytest.mark.parametrize("text", [None, "", "nohost", "h:0"])
def test_one_bad_address_is_refused_as_before(text):
    with pytest.raises(ValueError) as err:
        e.parse_etcd_addresses(text)
    assert str(err.value) == "--a3-etcd must be host:port, http://host:port or https://host:port, got %r" % text


def test_a_list_of_addresses():
    endpoints = e.parse_etcd_addresses("127.30.0.11:2379, http://127.30.0.12:2379/ ,[fd00::1]:2380")
    assert endpoints == (("http", "127.30.0.11", 2379, "http://127.30.0.11:2379"),
                         ("http", "127.30.0.12", 2379, "http://127.30.0.12:2379"),
                         ("http", "fd00::1", 2380, "http://[fd00::1]:2380"))
    assert endpoints.scheme == "http" and endpoints.hosts == ["127.30.0.11", "127.30.0.12", "fd00::1"]
    assert endpoints.base_url == "http://127.30.0.11:2379,http://127.30.0.12:2379,http://[fd00::1]:2380"
    tls = e.parse_etcd_addresses("https://a:1,HTTPS://b:1")
    assert tls.scheme == "https" and tls.hosts == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("a:1,b", "--a3-etcd must be host:port, http://host:port or https://host:port, got 'b' (in --a3-etcd a:1,b)"),
    ("a:1,", "--a3-etcd must be host:port, http://host:port or https://host:port, got '' (in --a3-etcd a:1,)"),
    (",a:1", "--a3-etcd must be host:port, http://host:port or https://host:port, got '' (in --a3-etcd ,a:1)"),
    ("a:1,b:2,ftp://c:3", "--a3-etcd must be host:port, http://host:port or https://host:port, got 'ftp://c:3' "
                          "(in --a3-etcd a:1,b:2,ftp://c:3)"),
    ("a:1,b:2,A:1", "--a3-etcd names http://A:1 twice (a:1,b:2,A:1)"),
    ("a:1,http://a:1/", "--a3-etcd names http://a:1 twice (a:1,http://a:1/)"),
    ("a:1,b:2,b:02", "--a3-etcd names http://b:02 twice (a:1,b:2,b:02)"),
    ("https://a:1,https://b:1,http://c:1", "--a3-etcd mixes http and https (https://a:1 and http://c:1): every member "
                                           "is read the same way"),
    ("a:1,https://b:1", "--a3-etcd mixes http and https (http://a:1 and https://b:1): every member is read the "
                        "same way"),
])
def test_a_bad_list_is_refused_naming_the_item(text, message):
    with pytest.raises(ValueError) as err:
        e.parse_etcd_addresses(text)
    assert str(err.value) == message


def test_the_same_host_on_other_ports_is_no_duplicate():
    assert e.parse_etcd_addresses("a:1,a:2").hosts == ["a", "a"]


@pytest.mark.parametrize("count, last_good, want", [
    (1, None, [0]), (1, 0, [0]),
    (3, None, [0, 1, 2]), (3, 0, [0, 1, 2]), (3, 1, [1, 0, 2]), (3, 2, [2, 0, 1]),
    (3, 3, [0, 1, 2]), (3, -1, [0, 1, 2]),   # an index that is none of theirs: the list's order
    (4, 2, [2, 0, 1, 3]),
])
def test_try_order_begins_with_the_last_good_endpoint(count, last_good, want):
    assert e.try_order(["x"] * count, last_good) == want


def test_try_order_defaults_to_the_lists_order():
    assert e.try_order(("a", "b")) == [0, 1]


def test_read_failure_text():
    a, b = e.parse_etcd_addresses("a:1,b:2")
    assert e.read_failure_text([(a, "ConnectError: refused")]) == "ConnectError: refused"
    assert e.read_failure_text([(b, "HTTP 503"), (a, "ConnectError: refused")]) == (
        "http://b:2: HTTP 503; http://a:1: ConnectError: refused")


def test_etcd_ssl_context_without_files_checks_the_server():
    context = e.etcd_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_etcd_ssl_context_refuses_missing_files(tmp_path):
    with pytest.raises((OSError, ssl.SSLError)):
        e.etcd_ssl_context(str(tmp_path / "ca.crt"))
    with pytest.raises((OSError, ssl.SSLError)):
        e.etcd_ssl_context(None, str(tmp_path / "c.crt"), str(tmp_path / "c.key"))


def test_etcd_ssl_context_loads_a_client_certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.fail("this test makes its certificate with the openssl tool, which is missing: apt-get install openssl",
                    pytrace=False)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "c.key", "-out", "c.crt",
                    "-days", "1", "-subj", "/CN=client"], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    context = e.etcd_ssl_context(str(tmp_path / "c.crt"), str(tmp_path / "c.crt"), str(tmp_path / "c.key"))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert any(cert["subject"] == ((("commonName", "client"),),) for cert in context.get_ca_certs())


def _kv(key, value):
    return {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value.encode()).decode()}


def test_ds_range_request_covers_the_prefix():
    body = e.ds_range_request()
    assert base64.b64decode(body["key"]) == b"/datasystem/cluster/"
    assert base64.b64decode(body["range_end"]) == b"/datasystem/cluster0"  # the prefix with its last byte + 1


def test_ds_worker_states():
    answer = {"kvs": [_kv("/datasystem/cluster/127.0.0.1:18481", "1700000000;ready"),
                      _kv("/datasystem/cluster/127.0.0.2:18481", "1700000000;start;host-b"),
                      _kv("/datasystem/cluster/127.0.0.9:18481", "1700000000;ready;host-x"),
                      _kv("/datasystem/other/127.0.0.3:18481", "1;ready")]}
    states = e.ds_worker_states(answer, ["127.0.0.1:18481", "127.0.0.2:18481", "127.0.0.3:18481"])
    assert states == {"127.0.0.1:18481": 1,   # ready
                      "127.0.0.2:18481": 0,   # registered, not ready yet
                      "127.0.0.3:18481": 0,   # not registered (a key outside the prefix does not count)
                      "127.0.0.9:18481": 1}   # registered, not expected: reported as well


def test_ds_worker_states_of_an_empty_answer():
    # etcd leaves out "kvs" when nothing matches
    assert e.ds_worker_states({"header": {}}, ["a:1"]) == {"a:1": 0}
    assert e.ds_worker_states(None, []) == {}
