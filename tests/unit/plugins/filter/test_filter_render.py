# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/render.py: every filter name Ansible calls maps to its function of
plugins/plugin_utils/_render.py, and a call through the mapping gives that function's result."""
from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible_collections.ascend.vllm_pd.plugins.filter.render import FilterModule  # noqa: E402
from helpers import FreshFilters  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _render as R  # noqa: E402


FILTERS = FreshFilters(FilterModule)


@pytest.mark.parametrize("name,function", [
    ("serve_lines", R.serve_lines), ("shell_dq", R.shell_dq), ("launcher_argv", R.launcher_argv),
    ("engine_processes", R.engine_processes), ("engine_env", R.engine_env), ("valued_flags", R.valued_flags),
    ("engine_wait_argv", R.engine_wait_argv), ("local_urls", R.local_urls), ("peer_urls", R.peer_urls),
    ("restart_reasons", R.restart_reasons), ("prefill_restarts", R.prefill_restarts),
    ("start_log_offset", R.start_log_offset),
])
def test_each_name_maps_to_its_function(name, function):
    assert FILTERS[name] is function


def test_no_other_name_is_registered():
    assert len(FILTERS) == 12


def test_engine_env_through_the_mapping():
    assert FILTERS["engine_env"]({"A": "1", "B": "2"}, {"B": "side"}, {"C": "x"}) == {"A": "1", "B": "side", "C": "x"}
