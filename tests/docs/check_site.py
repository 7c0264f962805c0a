#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Checks the collection's built docs site in headless Chromium (tests/docs/site.sh runs it).

Every role page (<role>_role.html) and every module page (<module>_module.html) is loaded by the browser, and the DOM
it rendered must hold an options table (class ansible-option-table) with a row for every option the role's argument
spec or the module's DOCUMENTATION declares. Sphinx's warnings must all be references into docs that an offline build
cannot reach (ALLOWED_LABELS). The index is kept as a screenshot.
"""
import argparse
import ast
import html.parser
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import yaml

# Labels that live in docs.ansible.com's and docs.python.org's intersphinx inventories, which an offline build cannot
# fetch: the ansible.builtin module pages the docs point to, and the pages antsibull-docs links from attributes and
# return values.
ALLOWED_LABELS = re.compile(r"^(ansible_collections\.ansible\.builtin\.[a-z_]+_(module|lookup|filter|test)"
                            r"(__parameter-[a-z_/]+)?"
                            r"|action_plugins|common_return_values|ansible_configuration_settings)$")
WARNING = re.compile(r"WARNING: undefined label: '([^']+)'")


class OptionTables(html.parser.HTMLParser):
    """The ids of the elements inside tables of class ansible-option-table."""

    def __init__(self):
        super().__init__()
        self.depth = 0          # nesting of option tables around the current element
        self.stack = []         # for each open table: whether it is an option table
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            is_options = "ansible-option-table" in (attrs.get("class") or "").split()
            self.stack.append(is_options)
            self.depth += is_options
        if self.depth and attrs.get("id"):
            self.ids.add(attrs["id"])

    def handle_endtag(self, tag):
        if tag == "table" and self.stack:
            self.depth -= self.stack.pop()


def option_ids(dom: str) -> set:
    parser = OptionTables()
    parser.feed(dom)
    return parser.ids


def bad_warnings(text: str) -> list:
    """The warning lines that are not an allowed unreachable reference."""
    bad = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = WARNING.search(line)
        if not (match and ALLOWED_LABELS.match(match.group(1))):
            bad.append(line)
    return bad


def module_options(path: str) -> list:
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DOCUMENTATION" for t in node.targets):
            return sorted((yaml.safe_load(node.value.value).get("options") or {}).keys())
    raise SystemExit("%s has no DOCUMENTATION" % path)


def expected_pages(collection: str) -> dict:
    """{page file name: [ids its option tables must hold]} for every role and module of the installed collection."""
    pages = {}
    roles = os.path.join(collection, "roles")
    for role in sorted(os.listdir(roles)):
        spec = os.path.join(roles, role, "meta", "argument_specs.yml")
        if not os.path.exists(spec):
            raise SystemExit("role %s has no meta/argument_specs.yml" % role)
        ids = []
        for entry, body in sorted((yaml.safe_load(open(spec, encoding="utf-8"))["argument_specs"]).items()):
            ids += ["parameter-%s--%s" % (entry, name) for name in sorted((body or {}).get("options") or {})]
        pages["%s_role.html" % role] = ids
    modules = os.path.join(collection, "plugins", "modules")
    for name in sorted(os.listdir(modules)):
        if name.endswith(".py") and not name.startswith("_"):
            pages["%s_module.html" % name[:-3]] = ["parameter-%s" % opt for opt in module_options(
                os.path.join(modules, name))]
    return pages


def chromium(args: list) -> str:
    with tempfile.TemporaryDirectory(prefix="a3-chromium-") as profile:
        proc = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--user-data-dir=" + profile] + args, capture_output=True, text=True, timeout=120,
                              check=False)
    if proc.returncode != 0:
        raise RuntimeError("chromium %s: exit %d: %s" % (" ".join(args), proc.returncode, proc.stderr[-500:]))
    return proc.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--site", required=True, help="the built HTML site")
    parser.add_argument("--collection", required=True, help="the installed collection the site documents")
    parser.add_argument("--warnings", required=True, help="sphinx-build's warning file")
    parser.add_argument("--screenshot", required=True)
    args = parser.parse_args(argv)
    problems = ["sphinx: " + line for line in bad_warnings(open(args.warnings, encoding="utf-8").read())]
    base = os.path.join(os.path.abspath(args.site), "collections", "ascend", "vllm_pd")
    pages = expected_pages(args.collection)

    def check(item):
        page, ids = item
        path = os.path.join(base, page)
        if not os.path.exists(path):
            return ["%s: not built" % page]
        dom = chromium(["--dump-dom", "file://" + path])
        if "</html>" not in dom:
            return ["%s: Chromium rendered no document" % page]
        found = option_ids(dom)
        if not ids:
            return ["%s: declares no option (nothing to check)" % page] if page.endswith("_module.html") else []
        missing = [i for i in ids if i not in found]
        return ["%s: the options table lacks %s" % (page, ", ".join(missing))] if missing else []

    with ThreadPoolExecutor(max_workers=2) as pool:
        for result in pool.map(check, sorted(pages.items())):
            problems += result
    index = os.path.join(base, "index.html")
    chromium(["--window-size=1280,1600", "--screenshot=" + os.path.abspath(args.screenshot), "file://" + index])
    if not os.path.getsize(args.screenshot):
        problems.append("the screenshot of the index is empty")
    if problems:
        sys.stderr.write("docs site: %d problem(s):\n  %s\n" % (len(problems), "\n  ".join(problems)))
        return 1
    print("docs site: %d pages (%d roles, %d modules) render their options tables in Chromium; screenshot %s"
          % (len(pages), sum(p.endswith("_role.html") for p in pages), sum(p.endswith("_module.html") for p in pages),
             args.screenshot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
