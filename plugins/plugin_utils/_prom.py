# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition: sum a metric over all its label sets (pure)."""
from __future__ import annotations

import re

# name, optional {labels} (a quoted label value may hold any character, "}" and escaped quotes included), value
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


def prom_sum(text: str, name: str):
    """Sum of every sample of `name` (None when the metric is absent)."""
    total, found = 0.0, False
    for line in str(text).splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            try:
                total += float(m.group(3))
                found = True
            except ValueError:
                continue
    return total if found else None
