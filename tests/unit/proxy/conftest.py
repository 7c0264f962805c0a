# -*- coding: utf-8 -*-
"""The honest proxy's package (roles/proxy/files/a3proxy) on the path of its unit tests (proxy_fakes.py holds the
helpers they share)."""
from __future__ import annotations

import sys
from pathlib import Path

FILES = Path(__file__).resolve().parents[3] / "roles" / "proxy" / "files"
if str(FILES) not in sys.path:
    sys.path.insert(0, str(FILES))
