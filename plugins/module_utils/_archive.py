# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install binaries from a release archive (etcd, Prometheus) in one module call: check the archive against its
pinned checksum, read the wanted members, and hand them to the plan of plugins/module_utils/_files.py, which
writes only the binaries whose bytes or mode differ (atomic renames; check mode writes nothing).

Before this, an install was unarchive (which runs tar to list, compare and extract) and one copy per binary: five
Python modules for etcd. Nothing is extracted to disk besides the binaries themselves."""
from __future__ import annotations

import hashlib
import tarfile

SHOWN_NAMES = 8  # members named in the error for a member the archive lacks


class ArchiveError(Exception):
    """A problem with the archive (checksum, format, a missing member), said so an operator can act on it."""


def parse_checksum(pinned: str):
    """'sha256:<hex>' or a bare sha256 hex -> (algorithm, hex); '' -> None (nothing pinned). Anything else raises
    ArchiveError naming the value."""
    pinned = (pinned or "").strip()
    if not pinned:
        return None
    algorithm, digest = pinned.rpartition(":")[::2]
    algorithm = (algorithm or "sha256").lower()
    if algorithm not in hashlib.algorithms_guaranteed:
        raise ArchiveError("checksum %r: unknown algorithm %r (write sha256:<hex>)" % (pinned, algorithm))
    digest = digest.lower()
    if not digest or set(digest) - set("0123456789abcdef") or len(digest) != hashlib.new(algorithm).digest_size * 2:
        raise ArchiveError("checksum %r is not a %s hex digest (write %s:<hex>, from the release's checksum file)"
                           % (pinned, algorithm, algorithm))
    return algorithm, digest


def file_digest(path: str, algorithm: str = "sha256") -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_checksum(path: str, pinned: str, label: str = "", pin_name: str = "the pinned checksum") -> None:
    """Raise ArchiveError when ``path``'s digest is not the pinned one (nothing pinned: no check). ``label`` names
    the archive in the message (the controller's path when the node holds a copy), ``pin_name`` the variable that
    pins it."""
    want = parse_checksum(pinned)
    if want is None:
        return
    got = file_digest(path, want[0])
    if got != want[1]:
        raise ArchiveError("%s has %s %s, but %s is %s:%s: use the official archive or correct %s"
                           % (label or path, want[0], got, pin_name, want[0], want[1], pin_name))


def read_members(path: str, names) -> dict:
    """{name: bytes} of the regular files ``names`` in the tar archive ``path`` (compression detected). A name the
    archive lacks, or one that is not a regular file, raises ArchiveError listing some of what it has."""
    names = list(names)
    try:
        with tarfile.open(path, "r:*") as tar:
            members = tar.getmembers()
            # "./etcd" and "etcd" are the same member (tar -C dir . writes the first form)
            found = {m.name[2:] if m.name.startswith("./") else m.name: m for m in members}
            missing = [n for n in names if n not in found or not found[n].isfile()]
            if missing:
                files = [m.name for m in members if m.isfile()]
                raise ArchiveError("%s has no regular file %s; it has %s%s" % (
                    path, ", ".join(missing), ", ".join(files[:SHOWN_NAMES]) or "no files",
                    " (and %d more)" % (len(files) - SHOWN_NAMES) if len(files) > SHOWN_NAMES else ""))
            return {name: tar.extractfile(found[name]).read() for name in names}
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ArchiveError("%s cannot be read as a tar archive: %s" % (path, e))


def member_files(contents: dict, members) -> list:
    """The files of plugins/module_utils/_files.py for ``members`` (dicts ``name``, ``dest``, ``mode`` as int)
    from ``contents`` ({name: bytes})."""
    return [{"path": m["dest"], "content": contents[m["name"]], "mode": m["mode"]} for m in members]
