# -*- coding: utf-8 -*-
"""The hostile-client suite (molecule/shared/hostile_suite.py) against the seed's configuration: no keys, no token,
etcd without TLS. The admin surface is off the public listener all the same, and every limit holds."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "molecule" / "shared"))
sys.path.insert(0, str(ROOT / "sim" / "lib"))
import hostile_suite  # noqa: E402
from hostile_suite import edge_settings  # noqa: E402

# The suite's tests and fixtures, collected here with this module's `edge`.
globals().update({name: value for name, value in vars(hostile_suite).items()
                  if name.startswith("test_") or name in hostile_suite.FIXTURES})


@pytest.fixture(scope="module")
def edge():
    return edge_settings(ROOT)
