# -*- coding: utf-8 -*-
"""The docs site check (tests/docs/check_site.py) finds option rows only in option tables, and lets through only the
warnings of references an offline build cannot resolve."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))

import check_site  # noqa: E402  (after the path)


def test_option_ids_only_inside_option_tables():
    dom = ('<div id="parameter-outside"></div><table class="longtable ansible-option-table docutils">'
           '<tr><td><div class="ansibleOptionAnchor" id="parameter-main--a"></div>'
           '<table class="other"><tr><td id="nested-in-other"></td></tr></table>'
           '<div id="parameter-main--b"></div></td></tr></table><table><tr><td id="parameter-after"></td></tr></table>')
    assert check_site.option_ids(dom) == {"parameter-main--a", "nested-in-other", "parameter-main--b"}


def test_only_unreachable_references_are_allowed():
    allowed = ("x.rst:53: WARNING: undefined label: 'ansible_collections.ansible.builtin.get_url_module' [ref.ref]\n"
               "x.rst:9: WARNING: undefined label: 'ansible_collections.ansible.builtin.template_module__parameter-validate'"
               " [ref.ref]\n"
               "x.rst:58: WARNING: undefined label: 'action_plugins' [ref.ref]\n\n"
               "x.rst:687: WARNING: undefined label: 'common_return_values' [ref.ref]\n")
    assert check_site.bad_warnings(allowed) == []
    ours = ("x.rst:1: WARNING: undefined label: 'ansible_collections.ascend.vllm_pd.proxy_role' [ref.ref]\n"
            "x.rst:2: WARNING: Inline emphasis start-string without end-string.\n"
            "x.rst:3: WARNING: undefined label: 'action_plugins_extra' [ref.ref]\n")
    assert len(check_site.bad_warnings(ours)) == 3


def test_expected_pages_cover_every_role_and_module():
    root = Path(__file__).resolve().parents[2]
    pages = check_site.expected_pages(str(root))
    roles = {p.name for p in (root / "roles").iterdir() if p.is_dir()}
    modules = {p.stem for p in (root / "plugins" / "modules").glob("*.py") if not p.name.startswith("_")}
    assert set(pages) == {"%s_role.html" % r for r in roles} | {"%s_module.html" % m for m in modules}
    assert "parameter-main--proxy_port" not in pages["proxy_role.html"]  # declared by common, not proxy
    assert "parameter-main--proxy_wrapper" in pages["proxy_role.html"]
    assert all(pages["%s_module.html" % m] for m in modules)
