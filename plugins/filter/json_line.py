# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: json_line
version_added: 1.0.0
author: ascend.vllm_pd contributors (@ascend)
short_description: The JSON object a command printed as its last C({...}) line
description:
  - Scripts the roles run on a node (the KV pool smoke check) print their result as one JSON object on a line of its
    own, after whatever the libraries they load print. This filter takes the last line of the output that starts
    with C({) and parses it.
  - Output without such a line (the process failed before it printed its result) gives an empty dict, so the
    caller judges a missing result like a wrong one. A last C({) line that is not JSON is an error.
positional: _input
options:
  _input:
    description: The command's C(stdout_lines) (or its C(stdout)); C(None) reads as no output.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Judge the smoke check's result
  ansible.builtin.assert:
    that: (yuanrong_smoke.stdout_lines | ascend.vllm_pd.json_line)['write'] | default('') == 'ok'
"""

RETURN = r"""
_value:
  description: The parsed object; C({}) when no line starts with C({).
  type: dict
"""

import json

from ansible.errors import AnsibleFilterError


def json_line(lines):
    """Parse the last line that starts with '{' as a JSON object; {} when there is none."""
    if lines is None:
        return {}
    if isinstance(lines, str):
        lines = lines.splitlines()
    if not isinstance(lines, (list, tuple)):
        raise AnsibleFilterError("json_line: the input must be a command's stdout_lines, got %s" % type(lines).__name__)
    found = [str(line).strip() for line in lines if str(line).lstrip().startswith("{")]
    if not found:
        return {}
    try:
        value = json.loads(found[-1])
    except ValueError as exc:
        raise AnsibleFilterError("json_line: the last '{' line is not JSON (%s): %s" % (exc, found[-1][:200]))
    return value  # JSON text that starts with '{' is an object


class FilterModule:
    def filters(self):
        return {"json_line": json_line}
