# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition: sum a metric over all its label sets (pure).

The filter runs in the controller's Python, which has ansible-core and not prometheus_client, so this reads the
text itself; tests/unit/plugins/plugin_utils/test_prom.py checks that it reads every sample as prometheus_client's
parser does (the parser of the benchmarks and the tests), label values holding "}", escaped quotes, backslashes
and newlines included. Where prometheus_client refuses the whole text, this skips the lines it cannot read."""
from __future__ import annotations

import re

# A label: its name, "=", its quoted value, in which a backslash escapes the next character (\\, \" and \n in the
# text format), so an escaped quote does not end it and "}" or "," inside it is text.
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"'
# A sample line (stripped): the metric name; a label set (blanks around its parts, a trailing comma) or blanks; the
# value (an optional timestamp and anything after it are not read).
_SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s*\{\s*(?:%s\s*(?:,\s*%s\s*)*,?\s*)?\}\s*|\s+)(\S+)'
                     % (_LABEL, _LABEL))


def _value(text: str):
    """A sample value as prometheus_client reads it (Python's float, without the digit separator "_" it refuses),
    else None."""
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def prom_sum(text: str, name: str):
    """Sum of every sample of `name` (None when the metric is absent)."""
    total, found = 0.0, False
    for line in str(text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            value = _value(m.group(2))
            if value is not None:
                total += value
                found = True
    return total if found else None
