# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the monitoring role's values, on the proxy host: Prometheus' basic-auth users (bcrypt hashes, as its
web config takes them) and the role's own login. No message shows a hash or the password. On every proxy host of
several (a3_proxy_hosts): a Prometheus on another host can reach its admin listener."""
from __future__ import annotations

import ipaddress
import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, SECRET, reads

_BCRYPT_RE = re.compile(r"^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$")


@reads("monitoring_prometheus_web_users", "monitoring_prometheus_web_user", "monitoring_prometheus_web_password",
       types=("monitoring_prometheus_web_users",))
def check_web_users(h, ctx):
    users = h.get("monitoring_prometheus_web_users")
    if users is ABSENT or users in (None, {}):
        return
    if not isinstance(users, dict):
        h.error("monitoring_prometheus_web_users", SECRET, "set a mapping {user: bcrypt hash}")
        return
    bad = sorted(str(u) for u, hashed in users.items() if not (isinstance(hashed, str) and _BCRYPT_RE.match(hashed)))
    if bad:
        h.errors.append("%s: monitoring_prometheus_web_users: the value of %s is not a bcrypt hash: set "
                        "the output of 'htpasswd -nBC 10 USER' after the colon (Prometheus' web config takes hashes)"
                        % (h.name, ", ".join(bad)))
    user, password = h.get("monitoring_prometheus_web_user"), h.get("monitoring_prometheus_web_password")
    if user is not ABSENT and user not in users:
        h.errors.append("%s: monitoring_prometheus_web_user is %r: the role's own calls log in as this user, which "
                        "monitoring_prometheus_web_users does not list: set one of %s"
                        % (h.name, user, ", ".join(sorted(map(str, users)))))
    if password in ("", None):
        h.errors.append("%s: monitoring_prometheus_web_password is not set: the role's own calls need the password "
                        "of monitoring_prometheus_web_user (Ansible Vault)" % h.name)


def _loopback(address) -> bool:
    try:
        return ipaddress.ip_address(str(address)).is_loopback
    except ValueError:
        return str(address) == "localhost"


@reads("proxy_admin_bind_host", "monitoring_hosts")
def check_proxy_scrape(h, ctx):
    """With several proxies, the Prometheus host scrapes each one's /metrics on its admin listener: one on another
    host's loopback is out of its reach (the target would be the Prometheus host's own loopback)."""
    proxies = ctx.proxy_hosts()
    if len(proxies) < 2:
        return
    _first, anchor = ctx.anchor()
    scrapers = anchor.get("monitoring_hosts") or [proxies[0]]
    bind = h.get("proxy_admin_bind_host")
    if bind is ABSENT or not _loopback(bind) or h.name in scrapers:
        return
    ctx.warnings.append("%s: proxy_admin_bind_host is %r: the Prometheus on %s scrapes this proxy's /metrics on its "
                        "admin listener, which then is that host's own loopback: set proxy_admin_bind_host to %s's "
                        "business IP (with proxy_admin_token), or list %s in monitoring_hosts"
                        % (h.name, bind, ", ".join(map(str, scrapers)), h.name, h.name))
