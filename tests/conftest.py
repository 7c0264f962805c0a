# -*- coding: utf-8 -*-
"""Make the checkout importable as ansible_collections.ascend.vllm_pd, and tests/ importable."""
from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
VENV_COLLECTIONS = ROOT / ".venv" / "collections"

link = VENV_COLLECTIONS / "ansible_collections" / "ascend" / "vllm_pd"
if not link.exists():
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(ROOT, link.parent))
for path in (str(VENV_COLLECTIONS), str(TESTS)):
    if path not in sys.path:
        sys.path.insert(0, path)
