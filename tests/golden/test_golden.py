# -*- coding: utf-8 -*-
"""Golden files: the render of inventories/a3 is committed under tests/golden/a3; any change to
what the deployment writes shows up as a diff here (regenerate with tests/golden/update.sh)."""
from __future__ import annotations

import difflib
from pathlib import Path

GOLDEN = Path(__file__).parent / "a3"


def tree(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_render_is_identical_to_the_golden_files(rendered_a3):
    assert GOLDEN.is_dir(), "no golden files: run tests/golden/update.sh"
    assert tree(rendered_a3) == tree(GOLDEN)
    diffs = []
    for rel in tree(GOLDEN):
        want, got = (GOLDEN / rel).read_text(), (rendered_a3 / rel).read_text()
        if want != got:
            diffs.append("".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                      "golden/" + rel, "rendered/" + rel)))
    assert not diffs, "render differs from tests/golden/a3 (intended? run tests/golden/update.sh):\n" + "\n".join(diffs)


def test_render_is_deterministic(rendered_a3, tmp_path):
    from golden.conftest import render
    render("inventories/a3", tmp_path)
    assert tree(tmp_path) == tree(rendered_a3)
    assert all((tmp_path / r).read_bytes() == (rendered_a3 / r).read_bytes() for r in tree(tmp_path))
