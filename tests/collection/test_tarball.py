# -*- coding: utf-8 -*-
"""The collection tarball ships the product only, and works as users get it: built with
ansible-galaxy collection build, installed with ansible-galaxy collection install into an empty
collections path, then ansible-playbook ascend.vllm_pd.render run from a directory outside the checkout
(no ansible.cfg of the checkout, no link to it) must render exactly tests/golden/a3."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GOLDEN = ROOT / "tests" / "golden" / "a3"
# Development and test material: no tarball member may be, or lie under, one of these.
NOT_SHIPPED = ("sim", "molecule", "tests", "benchmarks", "hacking", "inventories/sim", "demo.sh", "test.sh", "setup.sh",
               "requirements.txt", "ansible.cfg", ".ci", ".cache", ".venv", ".git", ".gitignore", ".ansible-lint",
               ".yamllint", ".pytest_cache", "docs/SIM-CONTRACT.md")
# The product: these must be in it (the license text galaxy.yml's license_file names, every role's README.md:
# Galaxy's importer refuses a role without one).
SHIPPED = ("MANIFEST.json", "FILES.json", "README.md", "LICENSE", "meta/runtime.yml", "playbooks/render.yml",
           "plugins/modules/engine_wait.py", "roles/vllm/tasks/main.yml", "inventories/a3/hosts.yml",
           "changelogs/changelog.yaml", "CHANGELOG.rst", "docs/benchmark/edge.md") + tuple(
               "roles/%s/README.md" % p.name for p in sorted((ROOT / "roles").iterdir()) if p.is_dir())


def run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (" ".join(args), proc.stdout[-4000:], proc.stderr[-2000:])
    return proc


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not (BIN / "ansible-galaxy").exists():
        pytest.skip("ansible-galaxy not beside this python (run ./setup.sh)")
    base = tmp_path_factory.mktemp("installed")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    environ.update(ANSIBLE_COLLECTIONS_PATH=str(base / "collections"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_HOME=str(base / "ansible-home"), PATH=os.pathsep.join([str(BIN), environ.get("PATH", "")]))
    return base, environ


@pytest.fixture(scope="module")
def tarball(env) -> Path:
    base, environ = env
    run([str(BIN / "ansible-galaxy"), "collection", "build", str(ROOT), "--output-path", str(base / "dist")],
        base, environ)
    (path,) = (base / "dist").glob("ascend-vllm_pd-*.tar.gz")
    return path


def test_tarball_ships_the_product_only(tarball):
    with tarfile.open(tarball) as tar:
        members = [m.name.rstrip("/") for m in tar.getmembers()]
    dev = [m for m in members if any(m == n or m.startswith(n + "/") for n in NOT_SHIPPED)
           or "__pycache__" in m.split("/") or m.endswith(".pyc")]
    assert not dev, "development files in the tarball (galaxy.yml build_ignore): %s" % dev
    missing = [m for m in SHIPPED if m not in members]
    assert not missing, "product files missing from the tarball: %s" % missing


def test_installed_collection_renders_the_golden_files(env, tarball):
    base, environ = env
    run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", str(tarball),
         "-p", str(base / "collections")], base, environ)
    installed = base / "collections" / "ansible_collections" / "ascend" / "vllm_pd"
    assert (installed / "MANIFEST.json").is_file() and not installed.is_symlink()
    workdir = base / "run"
    (workdir / "inventory").mkdir(parents=True)
    # an inventory of hosts alone, outside the checkout: every seed value comes from the installed roles
    (workdir / "inventory" / "hosts.yml").write_bytes((ROOT / "inventories" / "a3" / "hosts.yml").read_bytes())
    out = base / "render"
    run([str(BIN / "ansible-playbook"), "ascend.vllm_pd.render", "-i", "inventory",
         "-e", "render_dir=%s" % out], workdir, environ)

    from golden.test_golden import copies, tree   # the golden tree leaves out verbatim copies of role files
    copied = copies(out)
    assert copied and all((out / rel).read_bytes() == (ROOT / src).read_bytes() for rel, src in copied.items())
    assert [rel for rel in tree(out) if rel not in copied] == tree(GOLDEN)
    differ = [rel for rel in tree(GOLDEN) if (GOLDEN / rel).read_bytes() != (out / rel).read_bytes()]
    assert not differ, "the installed collection renders these differently from tests/golden/a3: %s" % differ


PLAYBOOKS = ("site", "validate", "preflight", "deploy", "render", "status", "stop", "verify", "teardown", "monitoring",
             "benchmark", "collect")


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_installed_playbooks_load_from_any_directory(env, tarball, playbook):
    """ansible-playbook ascend.vllm_pd.<name> resolves, imports its parts and lists its tasks (with every
    role of the collection) from a directory holding nothing but an inventory of hosts."""
    base, environ = env
    installed = base / "collections" / "ansible_collections" / "ascend" / "vllm_pd"
    if not installed.is_dir():
        run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", str(tarball),
             "-p", str(base / "collections")], base, environ)
    workdir = base / ("list-" + playbook)
    (workdir / "inventory").mkdir(parents=True)
    (workdir / "inventory" / "hosts.yml").write_bytes((ROOT / "inventories" / "a3" / "hosts.yml").read_bytes())
    proc = run([str(BIN / "ansible-playbook"), "ascend.vllm_pd." + playbook, "-i", "inventory", "--list-tasks"],
               workdir, environ)
    assert "playbook: %s" % (installed / "playbooks" / (playbook + ".yml")) in proc.stdout, proc.stdout[-2000:]
    if playbook == "site":   # (etcd, proxy and gate run on groups made at run time: not listed here)
        # (the engines: roles/vllm on both groups in one play; vllm_prefill and vllm_decode deploy one side alone)
        for role in ("common", "preflight", "hugepages", "container", "patches", "yuanrong", "vllm"):
            assert "ascend.vllm_pd.%s : " % role in proc.stdout, (role, proc.stdout[-3000:])
