# -*- coding: utf-8 -*-
"""_redact: every secret form the support bundle must hide, what it must leave alone, idempotence, bytes that are
not UTF-8, PEM blocks across lines (whole, cut at the start, cut at the end), and the secret file names."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _redact as R

M = "[REDACTED]"
# a realistic PEM body line (64 base64 characters)
B64 = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"


def red(text, secrets=()):
    return R.redact_text(text, secrets)


@pytest.mark.parametrize("text, expected", [
    # Authorization headers, in every spelling a log or a script shows them
    ("curl -H 'Authorization: Bearer sk-abc123xyz' http://p0:8088",
     "curl -H 'Authorization: Bearer %s' http://p0:8088" % M),
    ('header = "Authorization: Bearer abcdefgh"', 'header = "Authorization: Bearer %s"' % M),
    ("{'Authorization': 'Bearer sk-abc123'}", "{'Authorization': 'Bearer %s'}" % M),
    ('"authorization": "Basic dXNlcjpwYXNz"', '"authorization": "Basic %s"' % M),
    ("authorization=tok3n-value", "authorization=%s" % M),
    ("sent Bearer abcdef123456 to p1", "sent Bearer %s to p1" % M),
    # command line flags
    ("vllm serve /m --api-key s3cr3tKEY --port 6700", "vllm serve /m --api-key %s --port 6700" % M),
    ("vllm serve /m --api-key=s3cr3tKEY --port=6700", "vllm serve /m --api-key=%s --port=6700" % M),
    ('run --api-key "two words" --x 1', 'run --api-key "%s" --x 1' % M),   # its quotes stay
    ("proxy --a3-admin-token tok123 --token=abc --password hunter22", "proxy --a3-admin-token %s --token=%s --password %s"
     % (M, M, M)),
    ("etcdctl --user root:pa55word get /k", "etcdctl --user root:%s get /k" % M),
    # environment assignments
    ("export VLLM_API_KEY=abcd1234", "export VLLM_API_KEY=%s" % M),
    ("HF_TOKEN=hf_xxx ETCDCTL_PASSWORD='p w' AWS_SECRET=zz", "HF_TOKEN=%s ETCDCTL_PASSWORD='%s' AWS_SECRET=%s" % (M, M, M)),
    ('DATASYSTEM_CLIENT_PRIVATE_KEY="abc def"', 'DATASYSTEM_CLIENT_PRIVATE_KEY="%s"' % M),
    ("ADMIN_TOKEN=x1; DB_PASSWORD=y2", "ADMIN_TOKEN=%s; DB_PASSWORD=%s" % (M, M)),
    # secret keys in JSON, Python reprs, YAML and key=value text
    ('{"api_keys": ["k1", "k2"], "admin_token": "tok", "backend_api_key": "bk"}',
     '{"api_keys": ["%s"], "admin_token": "%s", "backend_api_key": "%s"}' % (M, M, M)),
    ("{'password': 'pw', 'etcd_password': 'pw2'}", "{'password': '%s', 'etcd_password': '%s'}" % (M, M)),
    ("proxy_admin_token: my admin token\nvllm_api_key: abc\n", "proxy_admin_token: %s\nvllm_api_key: %s\n" % (M, M)),
    ("  - password: \"pw\"\n", '  - password: "%s"\n' % M),
    ("GET /v1?token=abc123&x=1", "GET /v1?token=%s&x=1" % M),
    ("client(api_key=abc123, timeout=5)", "client(api_key=%s, timeout=5)" % M),
    # URL passwords
    ("etcd at https://root:pw123@10.0.0.1:2379/v3", "etcd at https://root:%s@10.0.0.1:2379/v3" % M),
])
def test_each_secret_form_is_redacted(text, expected):
    assert red(text) == expected
    assert red(expected) == expected


@pytest.mark.parametrize("text", [
    "INFO 12-04 03:00:01 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:6700",
    "the token is missing from the request; a password is required; keep the secret safe",
    "Token: please see the docs",            # prose at a line's start: a capitalised word, not a YAML key
    "max_tokens=16 max_num_batched_tokens=4096 num_tokens: 5 prompt_token_ids=[1, 2]",
    "--port 6700 --kv-port 30000 --data-parallel-rpc-port 10521 lookup_rpc_port=0 proxy_port: 8088",
    "--a3-secrets-file /workspace/proxy-secrets.json --etcd_key /w/etcd-pki/client.key --api-key-file /w/k",
    '{"api_key_file": "/var/lib/ascend-vllm-pd/vllm_api_key", "unit": "ascend-vllm.service", "timeout": 30}',
    'VLLM_API_KEY="$(cat /workspace/glm5-a3-large-ep/vllm_api_key)"',   # where the key is read from, not the key
    "export VLLM_API_KEY=$KEY; echo ${VLLM_API_KEY:+set}",
    "proxy_api_keys: []\nvllm_api_key: ''\nproxy_admin_token: \"\"\n",   # unset secrets stay visibly unset
    '{"api_keys": [], "admin_token": ""}',
    "Bearer None",                            # what the bare upstream proxy sends without a key
    "send a bearer token in the header",
    "http://127.30.0.11:6700/health 200; https://p0:8089/a3/backends",
    "Authorization header missing (HTTP 401)",
])
def test_ordinary_text_stays(text):
    assert red(text) == text


def test_literal_values_anywhere_longest_first():
    secrets = ["sk-engine-1234", "sk-engine-1234-long", "", None, "abc"]   # "abc": too short to replace everywhere
    text = "key sk-engine-1234-long then sk-engine-1234 in a url /x?k=sk-engine-1234 abc stays"
    assert red(text, secrets) == "key %s then %s in a url /x?k=%s abc stays" % (M, M, M)
    assert R.literal_secrets(secrets) == [b"sk-engine-1234-long", b"sk-engine-1234"]
    # a "secret" inside the mark itself would make a second pass change the first one's output
    assert R.literal_secrets(["REDACTED", "EDAC"]) == []


def test_counts_per_rule_and_not_for_what_was_already_redacted():
    counts = {}
    out = R.redact_bytes(b"VLLM_API_KEY=abc --api-key xyz Authorization: Bearer t0k3n-abc lit-value-1", ["lit-value-1"],
                         counts)
    assert counts == {"secret assignment": 1, "secret flag": 1, "authorization header": 1, "literal value": 1}
    assert R.redactions(counts) == 4
    again = {}
    assert R.redact_bytes(out, ["lit-value-1"], again) == out and again == {}


PEM = "-----BEGIN RSA PRIVATE KEY-----\n%s\n%s\nAB==\n-----END RSA PRIVATE KEY-----\n" % (B64, B64)


def test_a_pem_block_spanning_lines():
    text = "before\n" + PEM + "after\n"
    counts = {}
    assert R.redact_text(text, counts=counts) == (
        "before\n-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\nafter\n" % M)
    assert counts == {"pem private key": 1}
    # each whole block counts: two blocks (and a cut one after them) are three redactions
    counts = {}
    R.redact_text(PEM + "mid\n" + PEM + "log\n-----BEGIN PRIVATE KEY-----\n%s" % B64, counts=counts)
    assert counts == {"pem private key": 3}
    plain = "x -----BEGIN PRIVATE KEY-----\r\n%s\r\n-----END PRIVATE KEY----- y" % B64
    assert red(plain) == "x -----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY----- y" % M
    # a certificate is public: kept
    cert = "-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n" % B64
    assert red(cert) == cert


def test_a_pem_block_inside_a_json_string():
    text = '{"key": "-----BEGIN EC PRIVATE KEY-----\\n%s\\n-----END EC PRIVATE KEY-----\\n"}' % B64
    assert red(text) == '{"key": "-----BEGIN EC PRIVATE KEY-----\\n%s\\n-----END EC PRIVATE KEY-----\\n"}' % M


def test_a_pem_block_cut_by_a_log_tail():
    # the tail starts inside the block: the END and the base64 lines before it go, the log line above stays
    head_cut = "short log line\n%s\n%s\nAB==\n-----END PRIVATE KEY-----\nnext\n" % (B64, B64)
    counts = {}
    assert R.redact_text(head_cut, counts=counts) == "short log line\n%s\n-----END PRIVATE KEY-----\nnext\n" % M
    assert counts == {"pem private key": 1}
    # the file ends inside the block
    tail_cut = "log\n-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n%s" % (B64, B64[:20])
    counts = {}
    assert R.redact_text(tail_cut, counts=counts) == "log\n-----BEGIN OPENSSH PRIVATE KEY-----\n%s" % M
    assert counts == {"pem private key": 1}
    for text in (head_cut, tail_cut, PEM):
        assert B64 not in red(text)


@pytest.mark.parametrize("text", [
    PEM, "a\n" + PEM + PEM + "b", "VLLM_API_KEY=abc\n" + PEM, '{"api_keys": ["a", "b"]}', "--api-key 'x y'",
    "Authorization: Bearer abcdefgh", "proxy_admin_token: a b c", "https://u:p@h/", "%s\n-----END PRIVATE KEY-----" % B64,
])
def test_redacting_twice_equals_once(text):
    once = R.redact_bytes(text, ["abcdefgh"])
    assert R.redact_bytes(once, ["abcdefgh"]) == once
    assert once != text.encode()


def test_bytes_that_are_not_utf8_pass_through():
    data = b"\xff\xfe\x00binary VLLM_API_KEY=abc \x80\xc3( tail \xe4\xb8\xad --token k\xff\xfe"
    out = R.redact_bytes(data)
    # a value ends at white space: invalid bytes glued to it are part of it
    assert out == b"\xff\xfe\x00binary VLLM_API_KEY=[REDACTED] \x80\xc3( tail \xe4\xb8\xad --token [REDACTED]"
    assert R.redact_bytes(out) == out
    # a literal secret next to invalid bytes, and one given as bytes
    assert R.redact_bytes(b"\xffsk-secret-1\xfe", [b"sk-secret-1"]) == b"\xff[REDACTED]\xfe"
    assert R.redact_bytes(b"\xffsk-secret-1\xfe", ["sk-secret-1"]) == b"\xff[REDACTED]\xfe"
    # text holding surrogate escapes (bytes read with surrogateescape) comes back the same way
    text = data.decode("utf-8", "surrogateescape")
    assert R.redact_text(text).encode("utf-8", "surrogateescape") == out


def test_the_result_is_bytes_for_bytes_and_str_input():
    assert R.redact_bytes("plain") == b"plain"
    assert R.redact_bytes(b"plain") == b"plain"
    assert R.redact_text("plain") == "plain"


@pytest.mark.parametrize("path, secret", [
    ("/var/lib/ascend-vllm-pd/vllm_api_key", True),
    ("/var/lib/ascend-vllm-pd/proxy-secrets.json", True),
    ("/var/lib/ascend-vllm-pd/etcd-pki/client.key", True),
    ("/var/lib/ascend-vllm-pd/yr-curve/worker.key_secret", True),
    ("/etc/ascend-etcd/pki/server.KEY", True),
    ("/root/.ssh/id_ed25519", True),
    ("/x/admin_token", True),
    ("/x/db.password", True),
    ("/x/tls.pem", True),
    ("/var/lib/ascend-vllm-pd/run_dp_template.sh", False),
    ("/var/lib/ascend-vllm-pd/kv_transfer_config_dp0.json", False),
    ("/var/lib/ascend-vllm-pd/supervise/ascend-vllm.service.canary.json", False),
    ("/var/lib/ascend-vllm-pd/supervise/ascend-vllm.service.jsonl", False),
    ("/etc/systemd/system/ascend-vllm.service", False),
    ("/var/lib/ascend-vllm-pd/vllm_log.log", False),
])
def test_secret_file_names(path, secret):
    assert R.is_secret_path(path) is secret


def test_secret_paths_the_play_names():
    patterns = ["/w/etcd-pki/*", "/w/site.conf", "/etc/pki/*.crt"]
    assert R.is_secret_path("/w/etcd-pki/ca.crt", patterns)
    assert R.is_secret_path("/w/etcd-pki/sub/dir/file", patterns)   # everything under a directory named secret
    assert R.is_secret_path("/w/site.conf", patterns)
    assert R.is_secret_path("/w/./site.conf", patterns)
    assert R.is_secret_path("/etc/pki/a.crt", patterns)
    assert not R.is_secret_path("/w/etcd-pki-other/ca.crt", patterns)
    assert not R.is_secret_path("/w/site.conf.bak", patterns)
    assert not R.is_secret_path("/w/run.sh", patterns)
