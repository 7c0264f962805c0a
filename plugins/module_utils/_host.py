# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the preflight role's host checks (no Ansible imports)."""

from __future__ import annotations

import re

# One section of the preflight's host read:  @@name\n<output>\n@@rc N
_SECTION = re.compile(r'^@@(\w+)\n(.*?)\n?\n@@rc (-?\d+)$', re.DOTALL | re.MULTILINE)


def parse_sections(text):
    """The output of the preflight's one host read (a shell that prints every command's output between
    ``@@name`` and ``@@rc N`` lines) as ``{name: {'out': text, 'lines': [...], 'rc': N}}``.

    A section whose ``@@rc`` line is missing (the shell was cut short) is left out, so the caller
    reports it as not run rather than judging half an output."""
    out = {}
    for name, body, rc in _SECTION.findall(str(text or '')):
        out[name] = {'out': body, 'lines': body.splitlines(), 'rc': int(rc)}
    return out
