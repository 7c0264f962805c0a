# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._edge import edge_answers, edge_errorfiles


def _answers(messages):
    try:
        return edge_answers(messages)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def _errorfiles(messages, codes, retry_after, directory):
    try:
        return edge_errorfiles(messages, codes, retry_after, directory)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"edge_answers": _answers, "edge_errorfiles": _errorfiles}
