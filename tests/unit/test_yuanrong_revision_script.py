# -*- coding: utf-8 -*-
"""The worker restart's read of etcd's revision (roles/yuanrong/handlers/main.yml, yuanrong_revision_script) run as
the handler runs it: python -c URLS BODY, plus CA, client certificate and key under etcd_tls (URLS: every etcd
member's base URL, comma-separated, tried in order). Against a local HTTP server, and an HTTPS one that wants a
client certificate signed by its CA (etcd --client-cert-auth)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HANDLER = yaml.safe_load((ROOT / "roles" / "yuanrong" / "handlers" / "main.yml").read_text())[0]
SCRIPT = HANDLER["vars"]["yuanrong_revision_script"]
BODY = json.dumps({"key": "L2RhdGFzeXN0ZW0vY2x1c3Rlci8=", "range_end": "L2RhdGFzeXN0ZW0vY2x1c3RlcjA=", "count_only": True})

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402


class _Etcd(BaseHTTPRequestHandler):
    """etcd's JSON gateway, as far as the script reads it: POST /v3/kv/range -> {"header": {"revision": ...}}."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        ok = self.path == "/v3/kv/range" and body.get("count_only") is True
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"header": {"revision": "4242"}, "count": "3"}).encode())

    def log_message(self, *args):
        pass


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _cert(subject, key, issuer, issuer_key, usage, ca=False, ip=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if ip:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture
def pki(tmp_path):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as files."""
    pem = serialization.Encoding.PEM
    keys = {name: ec.generate_private_key(ec.SECP256R1()) for name in ("ca", "server", "client", "other")}
    ca = _cert("test CA", keys["ca"], "test CA", keys["ca"], None, ca=True)
    other_ca = _cert("other CA", keys["other"], "other CA", keys["other"], None, ca=True)
    server = _cert("etcd", keys["server"], "test CA", keys["ca"], [ExtendedKeyUsageOID.SERVER_AUTH], ip="127.0.0.1")
    client = _cert("p0", keys["client"], "test CA", keys["ca"], [ExtendedKeyUsageOID.CLIENT_AUTH])
    stranger = _cert("p9", keys["client"], "other CA", keys["other"], [ExtendedKeyUsageOID.CLIENT_AUTH])

    def key_pem(name):
        return keys[name].private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                        serialization.NoEncryption())
    return {
        "ca": _write(tmp_path / "ca.crt", ca.public_bytes(pem)),
        "other_ca": _write(tmp_path / "other-ca.crt", other_ca.public_bytes(pem)),
        "server": _write(tmp_path / "server.crt", server.public_bytes(pem)),
        "server_key": _write(tmp_path / "server.key", key_pem("server")),
        "client": _write(tmp_path / "client.crt", client.public_bytes(pem)),
        "client_key": _write(tmp_path / "client.key", key_pem("client")),
        "stranger": _write(tmp_path / "stranger.crt", stranger.public_bytes(pem)),
    }


def _serve(context=None):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Etcd)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _read(url, *tls):
    return subprocess.run([sys.executable, "-c", SCRIPT, url, BODY, *tls], capture_output=True, text=True,
                          check=False, timeout=60)


def test_plain_http_as_without_etcd_tls():
    server = _serve()
    try:
        done = _read("http://127.0.0.1:%d" % server.server_address[1])
    finally:
        server.shutdown()
    assert (done.returncode, done.stdout.strip()) == (0, "4242"), done.stderr


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_member_that_does_not_answer_is_passed_over():
    server = _serve()
    try:
        done = _read("http://127.0.0.1:%d,http://127.0.0.1:%d" % (_closed_port(), server.server_address[1]))
    finally:
        server.shutdown()
    assert (done.returncode, done.stdout.strip()) == (0, "4242"), done.stderr


def test_no_member_answers_names_the_last_one_tried():
    first, last = _closed_port(), _closed_port()
    done = _read("http://127.0.0.1:%d,http://127.0.0.1:%d" % (first, last))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("http://127.0.0.1:%d: " % last) and "refused" in done.stderr


@pytest.fixture
def https_etcd(pki):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["server"], pki["server_key"])
    context.load_verify_locations(pki["ca"])
    context.verify_mode = ssl.CERT_REQUIRED  # etcd --client-cert-auth
    server = _serve(context)
    yield "https://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_https_with_the_nodes_client_certificate(pki, https_etcd):
    done = _read(https_etcd, pki["ca"], pki["client"], pki["client_key"])
    assert (done.returncode, done.stdout.strip()) == (0, "4242"), done.stderr


def test_a_certificate_of_another_ca_is_refused(pki, https_etcd):
    done = _read(https_etcd, pki["ca"], pki["stranger"], pki["client_key"])
    assert done.returncode != 0 and done.stdout.strip() == ""


def test_a_server_the_ca_did_not_sign_is_not_trusted(pki, https_etcd):
    done = _read(https_etcd, pki["other_ca"], pki["client"], pki["client_key"])
    assert done.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in done.stderr


def test_no_client_certificate_is_refused(https_etcd):
    done = _read(https_etcd)  # the default path's arguments against an etcd with TLS
    assert done.returncode != 0 and done.stdout.strip() == ""
