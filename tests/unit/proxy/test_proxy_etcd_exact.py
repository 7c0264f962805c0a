# -*- coding: utf-8 -*-
"""a3proxy.etcd, pinned whole: the endpoints parsed from --a3-etcd, the exact refusals of the etcd options, the
range request and the workers' states from an etcd answer."""
from __future__ import annotations

import base64
import ssl

import pytest
from a3proxy import etcd as e


@pytest.mark.parametrize("text, want", [
    ("  h:1  ", ("http", "h", 1, "http://h:1")),
    ("Http://H-1.x_y:65535//", ("http", "H-1.x_y", 65535, "http://H-1.x_y:65535")),
    ("https://[::1]:2379", ("https", "::1", 2379, "https://[::1]:2379")),
    ("[fd00::1]:2", ("http", "fd00::1", 2, "http://[fd00::1]:2")),
    ("http://10.0.0.1:02379", ("http", "10.0.0.1", 2379, "http://10.0.0.1:02379")),
])
def test_parse_etcd_address(text, want):
    assert e.parse_etcd_address(text) == want
    assert e.EtcdEndpoint._fields == ("scheme", "host", "port", "base_url")


@pytest.mark.parametrize("text", [None, "h:65536", "h:123456", "https://", "h :1", "x://h:1", "https//h:1", ":1",
                                  "h:1:2", "[h]:1", "h:"])
def test_parse_etcd_address_refuses_naming_what_it_got(text):
    with pytest.raises(ValueError) as err:
        e.parse_etcd_address(text)
    assert str(err.value) == "--a3-etcd must be host:port, http://host:port or https://host:port, got %r" % text


@pytest.mark.parametrize("args, message", [
    ((None, "ca", "c", "k"), "--a3-etcd-ca, --a3-etcd-cert, --a3-etcd-key without --a3-etcd"),
    (("", None, None, "k"), "--a3-etcd-key without --a3-etcd"),
    (("https://h:1", None, "c", ""), "--a3-etcd-cert and --a3-etcd-key go together (the client certificate and its "
                                     "key)"),
    (("http://h:1", None, "c", "k"), "--a3-etcd-cert, --a3-etcd-key need an https:// etcd address "
                                     "(--a3-etcd http://h:1)"),
    (("h:1", "ca", None, None), "--a3-etcd-ca need an https:// etcd address (--a3-etcd h:1)"),
    (("bad", "ca", None, None), "--a3-etcd must be host:port, http://host:port or https://host:port, got 'bad'"),
])
def test_check_etcd_options_refuses(args, message):
    with pytest.raises(ValueError) as err:
        e.check_etcd_options(*args)
    assert str(err.value) == message


@pytest.mark.parametrize("args, want", [
    ((None, None, None, None), None), (("", "", "", ""), None),
    (("h:1", None, None, None), (("http", "h", 1, "http://h:1"),)),
    (("https://h:1", "ca", "c", "k"), (("https", "h", 1, "https://h:1"),)),
    (("https://h:1", "ca", None, None), (("https", "h", 1, "https://h:1"),)),
    (("https://h:1,https://g:1", "ca", "c", "k"), (("https", "h", 1, "https://h:1"), ("https", "g", 1, "https://g:1"))),
])
def test_check_etcd_options_accepts(args, want):
    got = e.check_etcd_options(*args)
    assert got == want and (got is None or isinstance(got, e.EtcdEndpoints))


@pytest.mark.parametrize("args, message", [
    (("h:1,g:1", None, "c", "k"), "--a3-etcd-cert, --a3-etcd-key need an https:// etcd address (--a3-etcd h:1,g:1)"),
    (("https://h:1,https://g:1", None, None, "k"), "--a3-etcd-cert and --a3-etcd-key go together (the client "
                                                   "certificate and its key)"),
    (("https://h:1,g:1", "ca", None, None), "--a3-etcd mixes http and https (https://h:1 and http://g:1): every "
                                            "member is read the same way"),
])
def test_check_etcd_options_refuses_a_list(args, message):
    with pytest.raises(ValueError) as err:
        e.check_etcd_options(*args)
    assert str(err.value) == message


def test_etcd_ssl_context_of_a_ca_file(tmp_path):
    with pytest.raises(OSError):
        e.etcd_ssl_context(ca=str(tmp_path / "missing.crt"))
    context = e.etcd_ssl_context(ca=None, cert=None, key=None)
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED


def test_ds_range_request():
    assert e.DS_PREFIX == "/datasystem/cluster/"
    assert e.ds_range_request() == {"key": "L2RhdGFzeXN0ZW0vY2x1c3Rlci8=", "range_end": "L2RhdGFzeXN0ZW0vY2x1c3RlcjA="}


def _b64(text):
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("value, ready", [
    ("1;ready", 1), ("1;ready;host", 1), ("ready", 0), ("1;readyx", 0), ("1;start;ready", 0), (";ready", 1),
    ("1;READY", 0), ("", 0)])
def test_ds_worker_states_reads_the_state_field(value, ready):
    answer = {"kvs": [{"key": _b64("/datasystem/cluster/w:1"), "value": _b64(value)}]}
    assert e.ds_worker_states(answer, ["w:1"]) == {"w:1": ready}


def test_ds_worker_states_of_odd_answers():
    assert e.ds_worker_states({"kvs": None}, ["a:1"]) == {"a:1": 0}
    assert e.ds_worker_states({}, ("a:1", "b:2")) == {"a:1": 0, "b:2": 0}
    # a key without a value, a key beside the prefix, a key that only starts like it
    answer = {"kvs": [{"key": _b64("/datasystem/cluster/a:1")}, {"key": _b64("/datasystem/clusterX/b:2"),
                                                                 "value": _b64("1;ready")},
                      {"value": _b64("1;ready")}]}
    assert e.ds_worker_states(answer, ["a:1", "b:2"]) == {"a:1": 0, "b:2": 0}


def _kv_bytes(key, value):
    return {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}


def test_ds_worker_states_reads_every_key_after_a_foreign_one_and_bad_bytes():
    answer = {"kvs": [_kv_bytes(b"/other/x:1", b"1;ready"), _kv_bytes(b"/datasystem/cluster/a:1", b"1;ready"),
                      _kv_bytes(b"/datasystem/cluster/b\xff:1", b"1;ready"),
                      _kv_bytes(b"/datasystem/cluster/c:1", b"\xff;ready")]}
    assert e.ds_worker_states(answer, []) == {"a:1": 1, "b\ufffd:1": 1, "c:1": 1}
