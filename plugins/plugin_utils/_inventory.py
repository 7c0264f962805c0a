# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the plain inventory dict that _topology works on from Ansible's hostvars and groups."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import HOST_KEYS, SIDES


def _plain(value):
    """Strip Ansible's wrapper types so the pure functions see str/int/list/dict."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def from_hostvars(hostvars, groups, defaults=None, keys=HOST_KEYS) -> dict:
    """Read `keys` for every prefill/decode host: the host's own value when the inventory (or -e, or a
    fact) sets one (hostvars templates it), else the collection's role default from `defaults`, else None.

    hostvars never holds role defaults, so without `defaults` an inventory of hosts alone would read
    as all None."""
    defaults = defaults or {}
    grp = {side: [str(h) for h in (groups.get(side) or [])] for side in SIDES}
    hosts = {}
    for side in SIDES:
        for h in grp[side]:
            hv = hostvars[h]
            hosts[h] = {key: _plain(hv[key]) if key in hv else _plain(defaults.get(key)) for key in keys}
    return {"groups": grp, "hosts": hosts}
