# -*- coding: utf-8 -*-
"""Mutation testing of the decision logic with mutmut (pinned in requirements.txt): ./test.sh mutants.

    tests/mutation.py                 every mutant of the decision modules, score per module, fails below 90 %
    tests/mutation.py --sample 300    a seeded random sample of the mutants (what .ci/run runs)
    tests/mutation.py --module _hccn  the modules whose path contains the text (repeatable)
    tests/mutation.py --survivors     also list every surviving mutant with its diff

The decision modules: plugins/module_utils, plugins/plugin_utils, plugins/filter, the supervisor helper
(roles/supervise/files/a3_supervise.py) and the proxy package (roles/proxy/files/a3proxy). The tests that judge
a mutant are the plain pytest suites of tests/unit (the fast ones, no Ansible run, no network).

mutmut names a mutant after the module it imports it as, so the work tree lays the sources out as the tests
import them: the collection at ansible_collections/ascend/vllm_pd (the tests' own conftest adds it to the path),
the proxy package and the supervisor helper at the top (A3_MUTATION_ROOT tells their tests to import them from
there). The work tree is .cache/mutation (or A3_MUTATION_WORK); mutmut keeps its results there and re-tests only what changed.

A mutant that no test can tell from the original (it changes nothing observable) is listed in
tests/mutants-equivalent.txt, one per line: the mutant's name, then '#' and the reason. Listed mutants count
neither as killed nor as survived. A listed name that mutmut no longer makes is reported, so the list cannot rot.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A3_MUTATION_WORK moves the work tree (two runs at once each need their own)
WORK = Path(os.environ.get("A3_MUTATION_WORK") or ROOT / ".cache" / "mutation").resolve()
COLLECTION = Path("ansible_collections/ascend/vllm_pd")
EQUIVALENT = ROOT / "tests" / "mutants-equivalent.txt"
GOAL = 90.0
# (the sources as the work tree holds them, where they come from in the checkout)
SOURCES = (
    (COLLECTION / "plugins" / "module_utils", "plugins/module_utils"),
    (COLLECTION / "plugins" / "plugin_utils", "plugins/plugin_utils"),
    (COLLECTION / "plugins" / "filter", "plugins/filter"),
    (Path("a3_supervise.py"), "roles/supervise/files/a3_supervise.py"),
    (Path("a3proxy"), "roles/proxy/files/a3proxy"),
)
TESTS = [COLLECTION / "tests" / "unit"]
# mutmut's verdicts (mutmut.stats.status_by_exit_code): what counts as caught.
KILLED = {"killed", "timeout", "caught by type check", "segfault"}


def checkout_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def sync_tree() -> None:
    """The work tree mirrors the checkout (changed files only, so mutmut's cache of unchanged code holds)."""
    dest = WORK / COLLECTION
    # mutmut reads its configuration from the working directory, also in the processes a test starts (a module run
    # as a script, ansible-playbook with the collection's root as its directory): the collection holds a copy too
    wanted = {dest / "setup.cfg"}
    for name in checkout_files():
        src, dst = ROOT / name, dest / name
        wanted.add(dst)
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for path in [p for p in dest.rglob("*") if p.is_file() and ".venv" not in p.parts]:
        if path not in wanted:
            path.unlink()
    for top, origin in SOURCES[3:]:
        target = WORK / top
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        (shutil.copytree if (ROOT / origin).is_dir() else shutil.copy2)(ROOT / origin, target)
    for path in (WORK / "setup.cfg", dest / "setup.cfg"):
        path.write_text(config())


def prune() -> None:
    """mutmut keeps its copy of a source file (and its records) after the file is gone from the checkout: drop
    them, or a deleted module's mutants would still count."""
    made = WORK / "mutants"
    for meta in list(made.rglob("*.py.meta")) if made.is_dir() else []:
        relative = meta.relative_to(made).with_suffix("")
        if not (WORK / relative).exists():
            for stale in (meta, meta.with_suffix(""), meta.with_suffix(".spans")):
                stale.unlink(missing_ok=True)


def config() -> str:
    sources = "\n    ".join(str(top) for top, _origin in SOURCES)
    return ("[mutmut]\n"
            "source_paths=\n    %s\n" % sources
            + "also_copy=\n    %s\n" % COLLECTION
            + "pytest_add_cli_args_test_selection=\n    %s\n" % "\n    ".join(str(t) for t in TESTS)
            + "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n    -q\n    -x\n"
            + "do_not_mutate=\n    *__init__.py\n")


def mutmut(args: list[str], capture: bool = False):
    env = dict(os.environ, A3_MUTATION_ROOT=str(WORK / "mutants"), PY_COLORS="0", NO_COLOR="1")
    exe = Path(sys.executable).parent / "mutmut"
    return subprocess.run([str(exe)] + args, cwd=WORK, env=env, check=False, text=True,
                          capture_output=capture)


def generate() -> None:
    """Let mutmut write every mutant (without testing any), to choose from them. mutmut has no command for this
    alone: these are the first steps of its own `run` (mutmut is pinned in requirements.txt)."""
    code = ("import os, mutmut.__main__ as m; os.makedirs('mutants', exist_ok=True); m.set_mutant_under_test("
            "'mutant_generation'); m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); "
            "m.create_mutants(os.cpu_count() or 2)")
    env = dict(os.environ, A3_MUTATION_ROOT=str(WORK / "mutants"))
    subprocess.run([sys.executable, "-c", code], cwd=WORK, env=env, check=True, capture_output=True)


def results() -> dict:
    """{mutant name: verdict} from mutmut's records in the work tree."""
    from mutmut.stats import status_by_exit_code  # noqa: PLC0415 (only in the venv that runs mutmut)
    found = {}
    for meta in (WORK / "mutants").rglob("*.meta"):
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            found[name] = status_by_exit_code[code]
    return found


def module_of(name: str) -> str:
    """ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology.x_derive__mutmut_3 -> plugin_utils/_topology"""
    dotted = name.rsplit(".", 1)[0].replace("ansible_collections.ascend.vllm_pd.plugins.", "")
    return dotted.replace(".", "/")


def equivalents() -> dict:
    listed = {}
    if EQUIVALENT.is_file():
        for line in EQUIVALENT.read_text().splitlines():
            name, _sep, reason = line.partition("#")
            if name.strip():
                listed[name.strip()] = reason.strip()
    return listed


def score(found: dict, listed: dict) -> tuple[dict, list]:
    """Per module: [killed, judged]; and the surviving mutants not listed as equivalent."""
    table = defaultdict(lambda: [0, 0])
    survivors = []
    for name, verdict in sorted(found.items()):
        if verdict in ("not checked", "skipped") or name in listed:
            continue
        row = table[module_of(name)]
        row[1] += 1
        if verdict in KILLED:
            row[0] += 1
        else:
            survivors.append((name, verdict))
    return dict(table), survivors


def report(table: dict, survivors: list, show: bool, stale: list) -> float:
    width = max([len(m) for m in table] + [6])
    print("\n{0:<{w}} {1:>7} {2:>7} {3:>7}".format("module", "killed", "judged", "score", w=width))
    killed = judged = 0
    for module, (k, n) in sorted(table.items()):
        killed, judged = killed + k, judged + n
        print("{0:<{w}} {1:>7} {2:>7} {3:>6.1f}%".format(module, k, n, 100.0 * k / n if n else 100.0, w=width))
    total = 100.0 * killed / judged if judged else 0.0
    print("{0:<{w}} {1:>7} {2:>7} {3:>6.1f}%".format("TOTAL", killed, judged, total, w=width))
    for name in stale:
        print("tests/mutants-equivalent.txt names %s, which mutmut no longer makes: remove the line" % name)
    if show:
        for name, verdict in survivors:
            print("\n--- %s (%s)" % (name, verdict))
            print(mutmut(["show", name], capture=True).stdout.strip())
    else:
        for name, verdict in survivors:
            print("%s: %s" % (verdict, name))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sample", type=int, default=0, help="test this many mutants, chosen at random (seeded)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("A3_MUTATION_SEED", "35")))
    parser.add_argument("--module", action="append", default=[], help="only mutants of modules whose path has this")
    parser.add_argument("--survivors", action="store_true", help="print each surviving mutant's diff")
    parser.add_argument("--fresh", action="store_true",
                        help="start from no records: mutmut re-collects which tests run which function only for "
                             "tests it has not seen, so a test that changed how it imports needs this")
    parser.add_argument("--goal", type=float, default=GOAL, help="the total score below which the run fails")
    parser.add_argument("--tests", action="append", default=[],
                        help="judge with only these tests (paths under tests/unit; a quicker check while writing "
                             "tests, with its own A3_MUTATION_WORK: the score counts only with the whole suite)")
    args = parser.parse_args()
    if args.tests:
        TESTS[:] = [COLLECTION / t for t in args.tests]

    WORK.parent.mkdir(parents=True, exist_ok=True)
    lock = open(str(WORK) + ".lock", "w", encoding="utf-8")  # pylint: disable=consider-using-with
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("mutation: another run is using %s; give this one its own work tree with A3_MUTATION_WORK=DIR" % WORK,
              file=sys.stderr)
        return 2
    if args.fresh and WORK.is_dir():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True, exist_ok=True)
    sync_tree()
    prune()
    names = []
    if args.sample or args.module:
        generate()
        every = sorted(results())
        names = [n for n in every if not args.module or any(m in module_of(n) for m in args.module)]
        if args.sample and args.sample < len(names):
            names = sorted(random.Random(args.seed).sample(names, args.sample))
        print("mutation: %d of %d mutants" % (len(names), len(every)), flush=True)
        if not names:   # mutmut run without names would run every mutant
            print("mutation: no mutant of a module whose path has %s (paths look like plugin_utils/_topology)"
                  % " or ".join(args.module), file=sys.stderr)
            return 2
    run = mutmut(["run"] + names, capture=True)
    if run.returncode != 0:
        print(run.stdout[-4000:], run.stderr[-4000:], sep="\n", file=sys.stderr)
        print("mutation: mutmut run failed (exit %d)" % run.returncode, file=sys.stderr)
        return 2
    made = results()
    chosen = set(names)
    found = {n: v for n, v in made.items() if n in chosen} if names else made
    listed = equivalents()
    stale = [n for n in listed if n not in made] if not names else []
    table, survivors = score(found, listed)
    total = report(table, survivors, args.survivors, stale)
    if total < args.goal or stale:
        print("mutation: %.1f%% is below the goal of %.0f%%%s" % (
            total, args.goal, " (and stale equivalents)" if stale else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
