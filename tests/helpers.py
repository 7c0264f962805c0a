# -*- coding: utf-8 -*-
"""Paths and commands shared by the tests (tests/ is on sys.path through tests/conftest.py)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def venv_bin(name: str) -> str:
    """A command from the checkout's virtual environment (or the one running the tests)."""
    for candidate in (ROOT / ".venv" / "bin" / name, Path(sys.executable).parent / name):
        if candidate.exists():
            return str(candidate)
    return name
