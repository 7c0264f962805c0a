# -*- coding: utf-8 -*-
"""_host's parsers of the preflight's host read: a /proc/meminfo value that holds a colon stays whole."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import parse_meminfo


def test_meminfo_splits_each_line_at_its_first_colon():
    assert parse_meminfo("MemTotal:  1024 kB\nNote: a: b\nno colon here\n  Hugepagesize :  2048 kB  ") == {
        "MemTotal": "1024 kB", "Note": "a: b", "Hugepagesize": "2048 kB"}
