# -*- coding: utf-8 -*-
"""plugins/module_utils/_archive.py, pinned exactly: the checksum forms it reads and the whole messages of what
it refuses, the digest of a file (literal values), the checksum check's message with and without label and pin
name, the members it reads and the whole message of a missing member, and the files handed to _files.py."""
from __future__ import annotations

import io
import tarfile

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import (
    ArchiveError, check_checksum, file_digest, member_files, parse_checksum, read_members)

# digests of b"abc" (the FIPS test vectors)
SHA256_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
MD5_ABC = "900150983cd24fb0d6963f7d28e17f72"
SHA1_ABC = "a9993e364706816aba3e25717850c26c9cd0d89d"


def make_archive(path, members, mode="w:gz"):
    """members: {name: bytes, None for a directory, or "->target" for a symbolic link}."""
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.mark.parametrize("pinned, want", [
    ("sha256:" + SHA256_ABC, ("sha256", SHA256_ABC)),
    (SHA256_ABC, ("sha256", SHA256_ABC)),
    (":" + SHA256_ABC, ("sha256", SHA256_ABC)),
    ("Sha256:" + SHA256_ABC.upper(), ("sha256", SHA256_ABC)),
    ("\tmd5:%s \n" % MD5_ABC, ("md5", MD5_ABC)),
    ("SHA1:" + SHA1_ABC, ("sha1", SHA1_ABC)),
    ("", None),
    (None, None),
    (" \n", None),
])
def test_parse_checksum_reads(pinned, want):
    assert parse_checksum(pinned) == want


@pytest.mark.parametrize("pinned, message", [
    ("sha256:", "checksum 'sha256:' is not a sha256 hex digest (write sha256:<hex>, from the release's checksum file)"),
    ("sha256:" + SHA256_ABC[:-1], "checksum 'sha256:%s' is not a sha256 hex digest (write sha256:<hex>, from the "
                                  "release's checksum file)" % SHA256_ABC[:-1]),
    (SHA256_ABC + "0", "checksum '%s0' is not a sha256 hex digest (write sha256:<hex>, from the release's checksum "
                       "file)" % SHA256_ABC),
    ("md5:" + SHA256_ABC, "checksum 'md5:%s' is not a md5 hex digest (write md5:<hex>, from the release's checksum "
                          "file)" % SHA256_ABC),
    ("sha256:" + "g" * 64, "checksum 'sha256:%s' is not a sha256 hex digest (write sha256:<hex>, from the release's "
                           "checksum file)" % ("g" * 64)),
    ("MD7:" + MD5_ABC, "checksum 'MD7:%s': unknown algorithm 'md7' (write sha256:<hex>)" % MD5_ABC),
    ("a:b:" + MD5_ABC, "checksum 'a:b:%s': unknown algorithm 'a:b' (write sha256:<hex>)" % MD5_ABC),
])
def test_parse_checksum_refuses_with_the_whole_message(pinned, message):
    with pytest.raises(ArchiveError) as err:
        parse_checksum(pinned)
    assert str(err.value) == message


def test_file_digest_reads_the_whole_file_with_the_algorithm(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    assert file_digest(str(p)) == SHA256_ABC
    assert file_digest(str(p), "md5") == MD5_ABC
    big = tmp_path / "big"
    big.write_bytes(b"\0" * (3 << 20) + b"end")
    assert file_digest(str(big)) == "224aecff2c0af98c6504162c8e11aff292cdb6d7ded73f3878af8dcfaafb08ef"


def test_check_checksum_passes_the_pinned_file_and_checks_nothing_without_a_pin(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    assert check_checksum(str(p), "sha256:" + SHA256_ABC) is None
    assert check_checksum(str(p), "md5:" + MD5_ABC.upper()) is None
    assert check_checksum(str(tmp_path / "missing"), "") is None  # nothing pinned: the file is not even read


def test_check_checksum_message_defaults_to_the_path_and_the_pinned_checksum(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    with pytest.raises(ArchiveError) as err:
        check_checksum(str(p), "md5:" + "0" * 32)
    assert str(err.value) == ("%s has md5 %s, but the pinned checksum is md5:%s: use the official archive or correct "
                              "the pinned checksum" % (p, MD5_ABC, "0" * 32))
    with pytest.raises(ArchiveError) as err:
        check_checksum(str(p), "1" * 64, label="/srv/a.tgz", pin_name="etcd_checksum")
    assert str(err.value) == ("/srv/a.tgz has sha256 %s, but etcd_checksum is sha256:%s: use the official archive or "
                              "correct etcd_checksum" % (SHA256_ABC, "1" * 64))


def test_read_members_reads_the_named_files_in_the_order_asked(tmp_path):
    path = make_archive(tmp_path / "a.tgz", {"./d/a": b"A", "d/b": b"B", "c": b""})
    got = read_members(path, iter(["d/b", "c", "d/a"]))
    assert got == {"d/b": b"B", "c": b"", "d/a": b"A"} and list(got) == ["d/b", "c", "d/a"]
    assert read_members(path, []) == {}


@pytest.mark.parametrize("members, names, tail", [
    ({"d": None, "d/a": b"A", "d/l": "->a"}, ["d", "d/l", "x", "d/a"],
     "has no regular file d, d/l, x; it has d/a"),
    ({"d": None}, ["x"], "has no regular file x; it has no files"),
    ({"./f%d" % i: b"" for i in range(8)}, ["x"],
     "has no regular file x; it has ./f0, ./f1, ./f2, ./f3, ./f4, ./f5, ./f6, ./f7"),
    ({"f%d" % i: b"" for i in range(9)}, ["x"],
     "has no regular file x; it has f0, f1, f2, f3, f4, f5, f6, f7 (and 1 more)"),
])
def test_read_members_names_what_is_missing_and_some_of_what_there_is(tmp_path, members, names, tail):
    path = make_archive(tmp_path / "a.tar", members, mode="w")
    with pytest.raises(ArchiveError) as err:
        read_members(path, names)
    assert str(err.value) == path + " " + tail


def test_read_members_of_what_is_no_archive_names_the_reason(tmp_path):
    with pytest.raises(ArchiveError) as err:
        read_members(str(tmp_path / "missing.tgz"), ["x"])
    assert str(err.value) == ("%s cannot be read as a tar archive: [Errno 2] No such file or directory: '%s'"
                              % (tmp_path / "missing.tgz", tmp_path / "missing.tgz"))
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"<html>404</html>")
    with pytest.raises(ArchiveError) as err:
        read_members(str(junk), ["x"])
    assert str(err.value).startswith("%s cannot be read as a tar archive: " % junk)


def test_read_members_of_a_truncated_archive_names_the_reason(tmp_path):
    whole = make_archive(tmp_path / "whole.tgz", {"big": bytes(range(256)) * 4096})
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(open(whole, "rb").read()[:2000])
    with pytest.raises(ArchiveError) as err:
        read_members(str(cut), ["big"])
    assert str(err.value).startswith("%s cannot be read as a tar archive: " % cut)


def test_member_files_are_the_files_of_the_plan():
    contents = {"d/etcd": b"E", "d/etcdctl": b"C", "d/other": b"O"}
    members = [{"name": "d/etcdctl", "dest": "/usr/local/bin/etcdctl", "mode": 0o755, "extra": 1},
               {"name": "d/etcd", "dest": "/usr/local/bin/etcd", "mode": 0o700}]
    assert member_files(contents, members) == [
        {"path": "/usr/local/bin/etcdctl", "content": b"C", "mode": 0o755},
        {"path": "/usr/local/bin/etcd", "content": b"E", "mode": 0o700}]
    assert member_files(contents, []) == []
