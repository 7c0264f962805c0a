#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the collection tarball with the publisher's repository URL.

Galaxy refuses a collection without `repository` in its metadata, and that URL belongs to whoever publishes the
collection, not to the source: galaxy.yml leaves it out and this script puts it in at build time.

    hacking/build_collection.py --repository https://git.example.org/you/vllm_pd [--output-path DIR]
    A3_COLLECTION_REPOSITORY=https://... hacking/build_collection.py

It copies the work tree's files (tracked and untracked, without what .gitignore ignores) to a temporary directory,
sets `repository:` in that copy's galaxy.yml (the source stays as it is) and runs `ansible-galaxy collection build`
there; galaxy.yml's build_ignore applies as usual. Prints the tarball's path.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from urllib.parse import urlparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def with_repository(galaxy_yml: str, url: str) -> str:
    """galaxy.yml's text with `repository: <url>` (replacing a top-level repository key, or appended)."""
    line = "repository: %s" % url
    text, count = re.subn(r"(?m)^repository:.*$", line, galaxy_yml)
    if count:
        return text
    return galaxy_yml + ("" if galaxy_yml.endswith("\n") else "\n") + line + "\n"


def check_url(url: str) -> str:
    """The URL, or SystemExit saying what Galaxy would refuse."""
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
        raise SystemExit("build_collection: --repository must be an http(s) URL without spaces, got %r" % url)
    if len(url) > 2000:  # Galaxy's limit on the metadata's URLs
        raise SystemExit("build_collection: --repository is longer than 2000 characters")
    return url


def work_tree_files(root: str) -> list:
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout
    return [name for name in out.decode().split("\0") if name and os.path.lexists(os.path.join(root, name))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repository", default=os.environ.get("A3_COLLECTION_REPOSITORY", ""),
                        help="the publisher's repository URL (default: $A3_COLLECTION_REPOSITORY)")
    parser.add_argument("--output-path", default=os.path.join(ROOT, ".cache", "build"))
    parser.add_argument("--ansible-galaxy", default=shutil.which("ansible-galaxy") or "ansible-galaxy")
    args = parser.parse_args(argv)
    if not args.repository:
        raise SystemExit("build_collection: give --repository URL (or set A3_COLLECTION_REPOSITORY): Galaxy requires "
                         "the publisher's repository URL in the collection's metadata")
    url = check_url(args.repository)
    os.makedirs(args.output_path, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="a3-build-") as tmp:
        copy = os.path.join(tmp, "vllm_pd")
        for name in work_tree_files(ROOT):
            src, dest = os.path.join(ROOT, name), os.path.join(copy, name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dest)
            else:
                shutil.copy2(src, dest)
        with open(os.path.join(copy, "galaxy.yml"), encoding="utf-8") as handle:
            text = handle.read()
        with open(os.path.join(copy, "galaxy.yml"), "w", encoding="utf-8") as handle:
            handle.write(with_repository(text, url))
        out = subprocess.run([args.ansible_galaxy, "collection", "build", "--force", "--output-path",
                              os.path.abspath(args.output_path), copy], check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("Created collection"):
            print(line.split(" at ", 1)[-1].strip())
            return 0
    sys.stderr.write(out.stdout)
    return 1


if __name__ == "__main__":
    sys.exit(main())
