# -*- coding: utf-8 -*-
"""The changelog: the fragments are valid for antsibull-changelog (lint), CHANGELOG.rst is generated from
changelogs/changelog.yaml, galaxy.yml's version is a release listing every module, and the fragments written since
then build the next release. Releases and generates run in a temporary copy of the collection (a release consumes
the fragments), never in the checkout."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG_TOOL = Path(sys.executable).parent / "antsibull-changelog"
FRAGMENTS = sorted((ROOT / "changelogs" / "fragments").glob("*.yml"))


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(CHANGELOG_TOOL.parent), os.environ.get("PATH", "")]))
    return subprocess.run([str(CHANGELOG_TOOL)] + args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def tool():
    if not CHANGELOG_TOOL.exists():
        pytest.skip("antsibull-changelog not beside this python (run ./setup.sh)")
    return CHANGELOG_TOOL


def test_fragments_lint(tool):
    proc = run(["lint"], ROOT)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def collection_copy(tmp_path: Path) -> Path:
    """The files antsibull-changelog reads, in a temporary ansible_collections/ascend/vllm_pd (a release consumes the
    fragments and a generate rewrites CHANGELOG.rst: never in the checkout)."""
    copy = tmp_path / "ansible_collections" / "ascend" / "vllm_pd"
    copy.mkdir(parents=True)
    for name in ("galaxy.yml", "changelogs", "plugins", "meta", "CHANGELOG.rst"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, copy / name)
    return copy


def test_changelog_rst_is_generated_from_changelog_yaml(tool, tmp_path):
    """CHANGELOG.rst is antsibull-changelog's rendering of changelogs/changelog.yaml, not hand-edited."""
    copy = collection_copy(tmp_path)
    proc = run(["generate"], copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (copy / "CHANGELOG.rst").read_text(encoding="utf-8") == (ROOT / "CHANGELOG.rst").read_text(encoding="utf-8"), \
        "CHANGELOG.rst differs from changelogs/changelog.yaml: run antsibull-changelog generate"


def test_galaxy_version_is_a_release_with_every_module():
    version = str(yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"])
    releases = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))["releases"]
    assert version in releases, "galaxy.yml's version %s has no release in changelogs/changelog.yaml" % version
    text = (ROOT / "CHANGELOG.rst").read_text(encoding="utf-8")
    assert "v%s\n" % version in text
    released = {m["name"] for r in releases.values() for m in r.get("modules", [])}
    major, minor, _patch = (int(x) for x in version.split("."))
    on_disk = {p.stem: yaml.safe_load(_documentation(p)) for p in (ROOT / "plugins" / "modules").glob("*.py")}
    # a module written since the release belongs to the next minor one (test_pending_fragments_make_the_next_release)
    pending = {name for name, doc in on_disk.items() if name not in released}
    assert released <= set(on_disk), "released modules missing from plugins/modules: %s" % (released - set(on_disk))
    assert {name: str(on_disk[name]["version_added"]) for name in pending} == {
        name: "%d.%d.0" % (major, minor + 1) for name in pending}
    assert all("New Modules" in text and m in text for m in released)


def _documentation(path: Path) -> str:
    """The DOCUMENTATION string of a module file, read without importing it."""
    return re.search(r"^DOCUMENTATION = r('\'\'|\"\"\")(.*?)\1", path.read_text(encoding="utf-8"), re.S | re.M).group(2)


def test_pending_fragments_make_the_next_release(tool, tmp_path):
    """The fragments written since the last release build the next one (the next minor release in the copy: what
    is developed after a release adds features; a new plugin says version_added of that minor), with every entry in
    CHANGELOG.rst."""
    if not FRAGMENTS:
        pytest.skip("no fragment since the last release")
    copy = collection_copy(tmp_path)
    version = str(yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"])
    major, minor, patch = (int(x) for x in version.split("."))
    proc = run(["release", "--version", "%d.%d.0" % (major, minor + 1), "--date", "2026-01-01"], copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (copy / "CHANGELOG.rst").read_text(encoding="utf-8")
    for fragment in FRAGMENTS:
        for section, entries in yaml.safe_load(fragment.read_text(encoding="utf-8")).items():
            for entry in entries if isinstance(entries, list) else [entries]:
                # the RST escapes some characters: compare the entry's first words
                assert " ".join(entry.split()[:3]) in text, (fragment.name, section, entry)
