# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the preflight role's values: the page size, versions, the memory reserve and the regular expressions
it matches listeners with."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import parse_size
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, as_int, reads

_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")


def check_patterns(h, keys):
    """Each value of these options (a string or a list of them) is a Python regular expression."""
    for key in keys:
        value = h.get(key)
        for pattern in (value if isinstance(value, list) else [value] if isinstance(value, str) else []):
            try:
                re.compile(pattern)
            except re.error as exc:
                h.error(key, pattern, "not a regular expression (%s): set a valid Python regular expression "
                        "(escape literal characters with \\)" % exc)


@reads("preflight_page_size", "preflight_min_hdk", "preflight_min_cann", "preflight_fabric_min_hdk",
       "preflight_fabric_min_cann")
def check_page_and_versions(h, ctx):
    page = as_int(h.get("preflight_page_size"))
    if h.get("preflight_page_size") is not ABSENT and (page is None or page < 4096 or page & (page - 1)):
        h.error("preflight_page_size", h.get("preflight_page_size"), "set the kernel page size in bytes "
                "(getconf PAGE_SIZE): 4096, or 65536 with the 64k openYuanrong package")
    for key in ("preflight_min_hdk", "preflight_min_cann", "preflight_fabric_min_hdk", "preflight_fabric_min_cann"):
        value = h.get(key)
        if value is not ABSENT and value not in (None, "") and not _VERSION_RE.match(str(value)):
            h.error(key, value, "set a dotted version such as 25.5.0, or \"\" to skip the check")


@reads("preflight_memory_reserve", "preflight_port_owner_names", "preflight_port_owner_cmdlines")
def check_reserve_and_patterns(h, ctx):
    reserve = h.get("preflight_memory_reserve")
    if reserve is not ABSENT:
        try:
            parse_size(reserve)
        except ValueError:
            h.error("preflight_memory_reserve", reserve, "set a size such as 16G, or 0")
    check_patterns(h, ("preflight_port_owner_names", "preflight_port_owner_cmdlines"))
