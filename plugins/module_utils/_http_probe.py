# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GET a list of URLs at once and report each one's status (the http_probe module's logic).

A loop of uri tasks costs one module round trip per URL; the gate and the engines' verify probe every
rank's /health and /metrics, so they ask once for the whole list.
"""
from __future__ import annotations

import urllib.error
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url


def fetch_status(url: str, timeout: float):
    """(HTTP status or None, error text or '') of one GET; the body is read and dropped."""
    try:
        with open_url(url, timeout=timeout) as resp:
            resp.read()
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, str(exc.reason)
    except (urllib.error.URLError, UrlsConnectionError, OSError, ValueError) as exc:
        return None, str(getattr(exc, "reason", exc))


def probe_all(urls, timeout: float, fetch=fetch_status, workers: int = 8):
    """One result per URL, in the order given: {'url', 'status', 'ok', 'error'}; ok is status 200."""
    urls = list(urls)
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(urls)))) as pool:
        answers = list(pool.map(lambda u: fetch(u, timeout), urls))
    return [{"url": u, "status": s, "ok": s == 200, "error": "" if s == 200 else (e or "HTTP %s" % s)}
            for u, (s, e) in zip(urls, answers)]


def failing(results):
    """The results that are not 200, described as '<url>: <error>'."""
    return ["%s: %s" % (r["url"], r["error"]) for r in results if not r["ok"]]
