# -*- coding: utf-8 -*-
"""plugins/module_utils/_archive.py: binaries from a release archive, checked against the pinned checksum, written
only when they differ (through the plan of _files.py)."""
from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import (
    ArchiveError, check_checksum, file_digest, member_files, parse_checksum, read_members)
from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import apply

ETCD = b"\x7fELF etcd 3.5.12"
ETCDCTL = b"\x7fELF etcdctl 3.5.12"


def make_archive(path, members, mode="w:gz"):
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            if data is None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture
def archive(tmp_path):
    return make_archive(tmp_path / "etcd-v3.5.12-linux-amd64.tar.gz", {
        "etcd-v3.5.12-linux-amd64": None,
        "etcd-v3.5.12-linux-amd64/etcd": ETCD,
        "etcd-v3.5.12-linux-amd64/etcdctl": ETCDCTL,
        "etcd-v3.5.12-linux-amd64/README.md": b"docs\n",
    })


def sha(path):
    return "sha256:" + hashlib.sha256(open(path, "rb").read()).hexdigest()


def members(dest_dir):
    return [{"name": "etcd-v3.5.12-linux-amd64/" + n, "dest": os.path.join(dest_dir, n), "mode": 0o755}
            for n in ("etcd", "etcdctl")]


def install(archive_path, dest_dir, check_mode=False):
    wanted = members(dest_dir)
    contents = read_members(archive_path, [m["name"] for m in wanted])
    return apply(member_files(contents, wanted), check_mode=check_mode, want_diff=True)


def test_parse_checksum_reads_pinned_forms():
    hexd = "ab" * 32
    assert parse_checksum("sha256:" + hexd) == ("sha256", hexd)
    assert parse_checksum(hexd.upper()) == ("sha256", hexd)
    assert parse_checksum(" SHA256:%s\n" % hexd.upper()) == ("sha256", hexd)  # as pasted from a checksum file
    assert parse_checksum("sha512:" + "cd" * 64) == ("sha512", "cd" * 64)
    assert parse_checksum("") is None
    assert parse_checksum("  ") is None


@pytest.mark.parametrize("pinned, says", [
    ("sha256:abc", "is not a sha256 hex digest"),
    ("sha512:" + "ab" * 32, "is not a sha512 hex digest"),  # a sha256 digest under another algorithm
    # the release's checksum file is get_url's to read (archive_install url): a local archive wants the digest
    ("sha256:https://github.com/prometheus/prometheus/releases/download/v3.5.0/sha256sums.txt", "unknown algorithm"),
    ("md7:" + "ab" * 16, "unknown algorithm 'md7'"),
    ("sha256:" + "zz" * 32, "is not a sha256 hex digest"),
])
def test_parse_checksum_refuses_what_is_not_a_digest(pinned, says):
    with pytest.raises(ArchiveError, match=says):
        parse_checksum(pinned)


def test_check_checksum_passes_the_pinned_archive_and_names_the_pin_of_another(archive, tmp_path):
    check_checksum(archive, sha(archive))
    check_checksum(archive, "")  # nothing pinned: nothing checked
    other = make_archive(tmp_path / "other.tar.gz", {"x": b"y"})
    with pytest.raises(ArchiveError) as e:
        check_checksum(other, sha(archive), label="/srv/etcd.tar.gz", pin_name="etcd_checksums['v3.5.12']['amd64']")
    msg = str(e.value)
    assert msg.startswith("/srv/etcd.tar.gz has sha256 %s, but etcd_checksums['v3.5.12']['amd64'] is %s"
                          % (sha(other).split(":")[1], sha(archive)))
    assert msg.endswith("correct etcd_checksums['v3.5.12']['amd64']")


def test_check_checksum_reads_the_pinned_algorithm(archive):
    digest = hashlib.sha512(open(archive, "rb").read()).hexdigest()
    assert file_digest(archive, "sha512") == digest
    check_checksum(archive, "sha512:" + digest)
    with pytest.raises(ArchiveError, match="has sha512 "):
        check_checksum(archive, "sha512:" + "0" * 128)


def test_read_members_reads_only_the_named_files(archive):
    got = read_members(archive, ["etcd-v3.5.12-linux-amd64/etcd", "etcd-v3.5.12-linux-amd64/etcdctl"])
    assert got == {"etcd-v3.5.12-linux-amd64/etcd": ETCD, "etcd-v3.5.12-linux-amd64/etcdctl": ETCDCTL}


def test_read_members_accepts_dot_slash_names_and_plain_tar(tmp_path):
    path = make_archive(tmp_path / "p.tar", {"./prometheus-2.42.0.linux-amd64/prometheus": b"P"}, mode="w")
    assert read_members(path, ["prometheus-2.42.0.linux-amd64/prometheus"]) == {
        "prometheus-2.42.0.linux-amd64/prometheus": b"P"}


def test_read_members_names_the_missing_member_and_what_the_archive_has(archive):
    with pytest.raises(ArchiveError) as e:
        read_members(archive, ["etcd-v3.5.12-linux-arm64/etcd", "etcd-v3.5.12-linux-amd64"])
    msg = str(e.value)
    assert "has no regular file etcd-v3.5.12-linux-arm64/etcd, etcd-v3.5.12-linux-amd64;" in msg  # a directory is no file
    assert "etcd-v3.5.12-linux-amd64/etcdctl" in msg


@pytest.mark.parametrize("mode", ["w:bz2", "w:xz", "w"])
def test_read_members_detects_the_compression(tmp_path, mode):
    path = make_archive(tmp_path / "etcd.tar", {"etcd-v3.5.12-linux-amd64/etcd": ETCD}, mode=mode)
    assert read_members(path, ["etcd-v3.5.12-linux-amd64/etcd"]) == {"etcd-v3.5.12-linux-amd64/etcd": ETCD}


def test_read_members_names_only_some_files_of_a_large_archive(tmp_path):
    path = make_archive(tmp_path / "many.tar.gz", {"d/f%02d" % i: b"x" for i in range(12)})
    with pytest.raises(ArchiveError) as e:
        read_members(path, ["d/etcd"])
    assert "d/f07" in str(e.value) and "d/f08" not in str(e.value) and str(e.value).endswith("(and 4 more)")


def test_read_members_says_when_the_file_is_no_archive(tmp_path):
    path = tmp_path / "etcd.tar.gz"
    path.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(ArchiveError, match="cannot be read as a tar archive"):
        read_members(str(path), ["etcd"])


def test_install_writes_the_binaries_then_changes_nothing(archive, tmp_path):
    dest = tmp_path / "bin"
    first = install(archive, str(dest))
    assert first["changed"] and sorted(os.path.basename(p) for p in first["changed_paths"]) == ["etcd", "etcdctl"]
    assert (dest / "etcd").read_bytes() == ETCD
    assert stat.S_IMODE((dest / "etcdctl").stat().st_mode) == 0o755
    assert not os.path.exists(dest / "etcd-v3.5.12-linux-amd64")  # nothing else extracted
    again = install(archive, str(dest))
    assert not again["changed"] and again["changed_paths"] == []


def test_install_replaces_only_the_binary_that_differs(archive, tmp_path):
    dest = tmp_path / "bin"
    install(archive, str(dest))
    (dest / "etcdctl").write_bytes(b"\x7fELF etcdctl 3.4.23")
    os.chmod(dest / "etcd", 0o700)
    result = install(archive, str(dest))
    assert sorted(result["changed_paths"]) == [str(dest / "etcd"), str(dest / "etcdctl")]
    assert (dest / "etcdctl").read_bytes() == ETCDCTL
    assert stat.S_IMODE((dest / "etcd").stat().st_mode) == 0o755


def test_check_mode_reports_and_writes_nothing(archive, tmp_path):
    dest = tmp_path / "bin"
    dest.mkdir()
    (dest / "etcd").write_bytes(b"old")
    result = install(archive, str(dest), check_mode=True)
    assert result["changed"] and len(result["changed_paths"]) == 2
    assert (dest / "etcd").read_bytes() == b"old" and not (dest / "etcdctl").exists()
