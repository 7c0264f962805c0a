# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the proxy role's values: the extra flags of the proxy script and the environment proxy.sh unsets."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    check_env_names, check_flag_dict, reads)

# The proxy script's own arguments (roles/proxy/vars: proxy_upstream_args) and the wrapper's --a3-* ones.
PROXY_FLAGS = ("port", "host", "prefiller-hosts", "prefiller-ports", "decoder-hosts", "decoder-ports")


@reads("proxy_unset_env")
def check_unset_env(h, ctx):
    check_env_names(h, "proxy_unset_env")


@reads("proxy_extra_args")
def check_extra_args(h, ctx):
    """On the proxy host."""
    check_flag_dict(h, "proxy_extra_args", "the proxy", "max-retries: 3", False,
                    lambda flag: "the role sets --%s itself (from the topology and the proxy_* variables): remove "
                    "it" % flag if flag in PROXY_FLAGS or flag.startswith("a3-") else None)
