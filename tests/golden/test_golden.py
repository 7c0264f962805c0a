# -*- coding: utf-8 -*-
"""Golden files: the render of inventories/a3 is committed under tests/golden/a3; any change to
what the deployment writes shows up as a diff here (regenerate with tests/golden/update.sh)."""
from __future__ import annotations

import difflib
from pathlib import Path

GOLDEN = Path(__file__).parent / "a3"
ROOT = Path(__file__).resolve().parents[2]
# Files the roles copy verbatim from their files/ directory (path on the node: source in the checkout).
# The golden tree does not repeat them; the render must carry them byte for byte.
COPIES = {
    "usr/local/libexec/ascend-vllm-pd/a3_supervise.py": "roles/supervise/files/a3_supervise.py",
    "var/lib/ascend-vllm-pd/a3_proxy.py": "roles/proxy/files/a3_proxy.py",
    "etc/prometheus/file_sd/ascend-vllm-pd/grafana/ascend-vllm-pd-dashboard.json":
        "roles/monitoring/files/ascend-vllm-pd-dashboard.json",
}
# The proxy wrapper's package: every module of roles/proxy/files/a3proxy must be shipped (a module the role's list
# forgets would be missing on the node).
PROXY_PACKAGE = {"var/lib/ascend-vllm-pd/a3proxy/%s" % p.name: "roles/proxy/files/a3proxy/%s" % p.name
                 for p in sorted((ROOT / "roles/proxy/files/a3proxy").glob("*.py"))}
COPIES.update(PROXY_PACKAGE)


def tree(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def copies(root: Path):
    """The verbatim copies in a render: {relative path: source in the checkout}."""
    return {rel: src for rel in tree(root) for suffix, src in COPIES.items() if rel.split("/", 1)[-1] == suffix}


def test_verbatim_copies_equal_their_sources(rendered_a3):
    found = copies(rendered_a3)
    # the helper on every node, the proxy wrapper and the Grafana dashboard on the proxy host only
    assert sorted(found) == sorted(["%s/%s" % (h, list(COPIES)[0]) for h in ("d0", "d1", "p0", "p1")]
                                   + ["p0/%s" % list(COPIES)[1], "p0/%s" % list(COPIES)[2]]
                                   + ["p0/%s" % rel for rel in PROXY_PACKAGE])
    assert len(PROXY_PACKAGE) >= 10
    for rel, src in found.items():
        assert (rendered_a3 / rel).read_bytes() == (ROOT / src).read_bytes(), rel


def test_render_is_identical_to_the_golden_files(rendered_a3):
    assert GOLDEN.is_dir(), "no golden files: run tests/golden/update.sh"
    assert [r for r in tree(rendered_a3) if r not in copies(rendered_a3)] == tree(GOLDEN)
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
