# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the protections (roles/common's security values, README "Security"), on the proxy host where the
proxy reads them: the admin listener's address, the keys and the token. No message shows a key's value."""
from __future__ import annotations

import ipaddress

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ABSENT, PLACEHOLDER_RE, as_bool, reads)


def _secret_problem(value):
    """What is wrong with a key or token (never its value), or None: a string without white space or quotes, which
    travels in an HTTP header and a JSON file."""
    if not isinstance(value, str) or isinstance(value, bool):
        return "is not a string: set a quoted string (Ansible Vault gives one)"
    if value != value.strip() or any(c.isspace() for c in value) or '"' in value or "\\" in value:
        return "contains white space, a quote or a backslash, which an HTTP header cannot carry: set another value"
    if PLACEHOLDER_RE.search(value):
        return "is still a placeholder: set the real value"
    return None


@reads("proxy_admin_bind_host", "proxy_admin_token", "a3_business_ip")
def check_admin_listener(h, ctx):
    admin = h.get("proxy_admin_bind_host")
    if admin is ABSENT:
        return
    try:
        addr = ipaddress.ip_address(str(admin))
    except ValueError:
        addr = None
    ip = h.hv.get("a3_business_ip")
    if addr is None or not (addr.is_loopback or addr.is_unspecified or str(admin) == str(ip)):
        h.error("proxy_admin_bind_host", admin, "set 127.0.0.1 (the proxy host's loopback, the default: the roles "
                "call the admin listener from that host), the proxy host's business IP or 0.0.0.0")
    elif not addr.is_loopback and not h.get("proxy_admin_token"):
        h.warn("proxy_admin_bind_host", admin, "the proxy's admin listener (drain, /instances/add) is reachable "
               "from the network without a token: set proxy_admin_token (Ansible Vault) or keep 127.0.0.1")


@reads("proxy_api_keys", types=("proxy_api_keys",))
def check_api_keys(h, ctx):
    keys = h.get("proxy_api_keys")
    if keys is ABSENT:
        return
    if not isinstance(keys, list):
        h.errors.append("%s: proxy_api_keys is not a list: set a list of keys (Ansible Vault), or [] for none"
                        % h.name)
    else:
        for index, key in enumerate(keys):
            problem = _secret_problem(key)
            if problem:
                h.errors.append("%s: proxy_api_keys[%d] %s" % (h.name, index, problem))
        named = [k for k in keys if isinstance(k, str)]
        if len(set(named)) != len(named):
            h.errors.append("%s: proxy_api_keys lists a key twice: remove the repeated one" % h.name)
    if not keys:
        ctx.open_listeners.append("the proxy's public port (set proxy_api_keys)")


@reads("proxy_admin_token", "vllm_api_key", "etcd_tls", types=("proxy_admin_token", "vllm_api_key"))
def check_secrets(h, ctx):
    for key in ("proxy_admin_token", "vllm_api_key"):
        value = h.get(key)
        if value is ABSENT or value in ("", None):
            continue
        problem = _secret_problem(value)
        if problem:
            h.errors.append("%s: %s %s" % (h.name, key, problem))
    if h.get("vllm_api_key") in ("", None):
        ctx.open_listeners.append("the engines' /v1 routes (set vllm_api_key)")
    if as_bool(h.get("etcd_tls")) is False:
        ctx.open_listeners.append("etcd on %s (set etcd_tls: true)" % ", ".join(ctx.etcd_hosts()))


@reads()
def report_open_listeners(ctx):
    if ctx.open_listeners:
        ctx.warnings.append("listeners that take requests without credentials: %s. That is the seed's configuration; "
                            "README 'Security' says how to turn each protection on"
                            % "; ".join(dict.fromkeys(ctx.open_listeners)))   # (each proxy host adds its own)
