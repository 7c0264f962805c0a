# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the etcd role's values, on the etcd host: the release, its checksum, the member name, the certificates'
lifetimes."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, as_int, reads

_ETCD_VERSION_RE = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+$")
_SHA256_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@reads("etcd_version", "etcd_name")
def check_release(h, ctx):
    version = h.get("etcd_version")
    if version is not ABSENT and not (isinstance(version, str) and _ETCD_VERSION_RE.match(version)):
        h.error("etcd_version", version, "the release archive is etcd-<version>-linux-<arch>.tar.gz: set vX.Y.Z, "
                "e.g. v3.5.12")
    name = h.get("etcd_name")
    if name is not ABSENT and not (isinstance(name, str) and re.match(r"^[A-Za-z0-9._-]+$", name)):
        h.error("etcd_name", name, "it goes into --initial-cluster <name>=<url>: set letters, digits, '.', '_' or "
                "'-', e.g. etcd-single")


@reads("etcd_version", "etcd_archive_src", "etcd_checksums", "etcd_download_base_url")
def check_download(h, ctx):
    version = h.get("etcd_version")
    if not (isinstance(version, str) and _ETCD_VERSION_RE.match(version)):
        version = ABSENT  # check_release reports it
    archive, sums = h.get("etcd_archive_src"), h.get("etcd_checksums")
    if isinstance(sums, dict):
        for ver, per_arch in sums.items():
            if not isinstance(per_arch, dict) or not all(
                    isinstance(s, str) and _SHA256_RE.match(s) for s in per_arch.values()):
                h.error("etcd_checksums", {ver: per_arch}, "set {amd64: sha256:<64 hex>, arm64: sha256:<64 hex>} "
                        "from the release's SHA256SUMS")
    if archive in (None, "") and isinstance(version, str) and isinstance(sums, dict) and not sums.get(version):
        h.error("etcd_version", version, "etcd_checksums has no sha256 for it and etcd_archive_src is empty, so the "
                "download is refused on the node: add etcd_checksums['%s'] (amd64/arm64 from the release's "
                "SHA256SUMS) or set etcd_archive_src to an archive on the controller" % version)
    base = h.get("etcd_download_base_url")
    if archive in (None, "") and base is not ABSENT and not (
            isinstance(base, str) and re.match(r"^https?://[^\s/]+", base)):
        h.error("etcd_download_base_url", base, "set an http(s) URL of the release directory, e.g. "
                "https://github.com/etcd-io/etcd/releases/download")


@reads("etcd_tls_renew_days", "etcd_tls_cert_days", "etcd_tls_ca_days")
def check_tls_days(h, ctx):
    """The certificates' lifetimes: a renewal window as long as a certificate's life would reissue it on every run."""
    renew = as_int(h.get("etcd_tls_renew_days"))
    for key in ("etcd_tls_cert_days", "etcd_tls_ca_days"):
        days = as_int(h.get(key))
        if renew is not None and days is not None and renew >= days:
            h.error("etcd_tls_renew_days", renew, "it is not below %s (%d), so every run would reissue the "
                    "certificates and restart etcd and the workers: set fewer days (default 30)" % (key, days))
