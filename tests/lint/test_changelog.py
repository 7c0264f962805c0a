# -*- coding: utf-8 -*-
"""The changelog fragments are valid for antsibull-changelog, and a release can be built from them:
antsibull-changelog lint on the checkout, then antsibull-changelog release in a temporary copy of the
collection (a release consumes the fragments, so never in the checkout). The built CHANGELOG.rst must
carry every fragment's entries and the collection's modules."""
from __future__ import annotations

import os
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


def test_release_builds_the_changelog(tool, tmp_path):
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"]
    copy = tmp_path / "ansible_collections" / "ascend" / "vllm_pd"
    copy.mkdir(parents=True)
    for name in ("galaxy.yml", "changelogs", "plugins", "meta"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, copy / name)
    proc = run(["release", "--version", str(version), "--date", "2026-01-01"], copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (copy / "CHANGELOG.rst").read_text(encoding="utf-8")
    assert "v%s\n" % version in text
    for fragment in FRAGMENTS:
        for section, entries in yaml.safe_load(fragment.read_text(encoding="utf-8")).items():
            for entry in entries if isinstance(entries, list) else [entries]:
                # the RST escapes some characters: compare the entry's first words
                assert " ".join(entry.split()[:3]) in text, (fragment.name, section, entry)
    modules = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py"))
    assert "New Modules" in text and all(m in text for m in modules), text[-2000:]
