# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: size_gib
short_description: Whole GiB of a size written as 500G, 1T, 2048 kB or bytes
description:
  - Reads a size the way the inventory writes it (a number with an optional k, M, G or T unit, binary multiples, or
    an integer of bytes) and returns the whole GiB.
  - The same file provides C(size_mib) (whole MiB), C(size_bytes) (bytes) and C(docker_size) (docker's
    C(--shm-size) form, C(500g) or C(512m)), see plugins/plugin_utils/_topology.py.
positional: _input
options:
  _input:
    description: The size, e.g. C(500G).
    type: raw
    required: true
"""

EXAMPLES = r"""
hugepages_count: "{{ (hugepages_target | ascend.vllm_pd.size_mib) // 2 }}"
shm_size: "{{ container_shm_size | ascend.vllm_pd.docker_size }}"
"""

RETURN = r"""
_value:
  description: Whole GiB of the size.
  type: int
"""

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
