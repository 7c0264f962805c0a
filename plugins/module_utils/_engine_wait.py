# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for vLLM engine ranks while watching their log for fatal signatures (pure helpers + loop).

launch_online_dp.py exits 0 even when vllm serve failed, and a rank's API only comes up once its whole
DP group formed: readiness comes from each rank's /health, and the log tells early why it never will.
"""
from __future__ import annotations

import re
import time
import urllib.error

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url


def scan(text: str, signatures: list):
    """The first signature (in list order: specific ones first, generic ones last) that matches a line
    of text: (signature dict, matching line) or (None, None)."""
    lines = text.splitlines()
    for sig in signatures:
        rx = re.compile(sig["pattern"])
        for line in lines:
            if rx.search(line):
                return sig, line.strip()
    return None, None


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def probe(url: str, timeout: float = 3.0) -> bool:
    try:
        with open_url(url, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, UrlsConnectionError, OSError, ValueError):
        return False


def read_from(path: str, offset: int):
    """Text appended to path since offset, and the new offset (a truncated file restarts at 0)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            if size < offset:
                offset = 0
            fh.seek(offset)
            data = fh.read()
            return data.decode("utf-8", "replace"), offset + len(data)
    except FileNotFoundError:
        return "", offset


def wait(urls, log_path, signatures, timeout, interval, start_offset=0, clock=time.monotonic, sleep=time.sleep,
         prober=probe, alive=None, signatures_fatal=True):
    """Poll urls until all answer 200. Returns a dict with ok, ready, pending, signature, line, log_tail,
    waited. Stops early on a fatal log signature (unless signatures_fatal is false: engines a supervisor
    restarts by itself may log one and recover; the signature then only explains a wait that ends without
    every rank ready) or when alive() says the launcher is gone."""
    start = clock()
    offset = start_offset
    seen = ""
    ready = []

    def catch_up():
        """Read what the log gained since the last read into `seen`; return the new text."""
        nonlocal offset, seen
        new, offset = read_from(log_path, offset) if log_path else ("", offset)
        seen = (seen + new)[-200000:]
        return new

    while True:
        sig, line = scan(catch_up(), signatures)
        ready = [u for u in urls if prober(u)]
        base = {"ready": ready, "pending": [u for u in urls if u not in ready], "waited": round(clock() - start, 1),
                "log_tail": tail(seen)}
        if len(ready) == len(urls):
            return dict(base, ok=True, signature=None, line=None)
        if sig is not None and signatures_fatal:
            return dict(base, ok=False, signature=sig, line=line)
        if alive is not None and not alive():
            # the launcher is gone: read what it wrote last before saying why
            catch_up()
            sig, line = scan(seen, signatures)
            base["log_tail"] = tail(seen)
            if sig is not None:
                return dict(base, ok=False, signature=sig, line=line)
            return dict(base, ok=False, signature={"pattern": "launcher exited",
                                                   "advice": "the launcher and all its engines exited: read the log tail below"},
                        line="(no engine process left)")
        if clock() - start >= timeout:
            sig, line = scan(seen, signatures)
            return dict(base, ok=False, signature=sig, line=line)
        sleep(interval)
