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
