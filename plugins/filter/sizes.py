# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

# Each filter of this file is documented in plugins/filter/<filter name>.yml: ansible-doc shows a
# Python file's own DOCUMENTATION for every filter the file provides, so this one has none.

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    docker_size, parse_size, size_gib, size_mib)


def _size(func, value):
    try:
        return func(value)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {
            "size_gib": lambda v: _size(size_gib, v),
            "docker_size": lambda v: _size(docker_size, v),
            "size_mib": lambda v: _size(size_mib, v),
            "size_bytes": lambda v: _size(parse_size, v),
        }
