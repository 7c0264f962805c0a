# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the plain inventory dict the topology and the validation work on from Ansible's hostvars and groups:

    {"groups": {"prefill": [...], "decode": [...]},
     "hosts": {name: {<per-host key>: value}}}

The per-host keys are the options the roles' argument specs declare (_specs.host_keys: every option but the
topology fact and what derives from it). Pure functions, no Ansible imports; the bottom of the import chain
validation -> topology -> inventory (-> specs, defaults).
"""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._specs import host_keys

# The inventory groups of the two sides, prefill first.
SIDES = ("prefill", "decode")


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


def _templated_text(value) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def from_hostvars(hostvars, groups, defaults=None, keys=None, raw=None) -> dict:
    """Read `keys` (default: every per-host key the specs declare) for every prefill/decode host: the host's own
    value when the inventory (or -e, or a fact) sets one (hostvars templates it), else the collection's role
    default from `defaults`, else None.

    hostvars never holds role defaults, so without `defaults` an inventory of hosts alone would read
    as all None. For the same reason an inventory value that names a role default ("{{ container_image }}") cannot
    be templated on the controller: with `raw` (host -> its untemplated variables) such a value is read as its
    template text, which the validation skips as it skips every value it cannot judge before templating; any
    other failure of the templating is raised."""
    defaults = defaults or {}
    keys = host_keys() if keys is None else keys
    grp = {side: [str(h) for h in (groups.get(side) or [])] for side in SIDES}
    hosts = {}
    for side in SIDES:
        for h in grp[side]:
            hv = hostvars[h]
            values = {}
            for key in keys:
                if key not in hv:
                    values[key] = _plain(defaults.get(key))
                    continue
                try:
                    values[key] = _plain(hv[key])
                except Exception:
                    text = (raw(h) or {}).get(key) if raw is not None else None
                    if not _templated_text(text):
                        raise
                    values[key] = str(text)
            hosts[h] = values
    return {"groups": grp, "hosts": hosts}
