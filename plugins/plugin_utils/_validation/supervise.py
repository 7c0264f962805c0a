# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the supervise role's values: systemd unit names and the restart back-off."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, as_int, reads

_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\-]+$")


@reads("supervise_worker_service", "supervise_engine_service", "etcd_service_name")
def check_unit_names(h, ctx):
    names = {}
    for key in ("supervise_worker_service", "supervise_engine_service", "etcd_service_name"):
        value = h.get(key)
        if value is ABSENT:
            continue
        if not (isinstance(value, str) and _UNIT_RE.match(value)) or value.endswith(".service"):
            h.error(key, value, "set a systemd unit name without .service (letters, digits, ':', '_', '.', "
                    "'-'), e.g. ascend-vllm")
        else:
            names.setdefault(value, []).append(key)
    for value, keys in names.items():
        if len(keys) > 1:
            h.error(keys[-1], value, "%s has the same unit name: set different names" % " and ".join(keys[:-1]))


@reads("supervise_backoff_base", "supervise_backoff_max")
def check_backoff(h, ctx):
    base, cap = as_int(h.get("supervise_backoff_base")), as_int(h.get("supervise_backoff_max"))
    if base is not None and cap is not None and 0 <= cap < base:
        h.warn("supervise_backoff_max", cap, "it is below supervise_backoff_base (%d), so every restart waits "
               "the cap: set it at least as large" % base)
