# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the gate role's values."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import reads
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.preflight import check_patterns


@reads("gate_expect_pattern")
def check_expect_pattern(h, ctx):
    check_patterns(h, ("gate_expect_pattern",))
