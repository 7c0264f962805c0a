# -*- coding: utf-8 -*-
"""The honest proxy's package (roles/proxy/files/a3proxy) on the path of its unit tests (proxy_fakes.py holds the
helpers they share), and no skipping: a proxy test that would skip (a missing package or tool) fails instead,
with the reason it gave, so ./test.sh can never pass with part of the proxy untested."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[3] / "roles" / "proxy" / "files"
# tests/mutation.py lays the package out at A3_MUTATION_ROOT (mutmut names its mutants after that import)
FILES = Path(os.environ.get("A3_MUTATION_ROOT") or FILES)
if str(FILES) not in sys.path:
    sys.path.insert(0, str(FILES))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = ("a proxy test may not skip, it skipped: %s (./setup.sh installs what the tests need)"
                           % reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.outcome == "skipped":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = ("a proxy test module may not skip, it skipped: %s (./setup.sh installs what the tests need)"
                           % reason)


@pytest.fixture
def logs(caplog):
    """The wrapper's log records since the last call, as (level, message); each call clears them."""
    caplog.set_level(logging.DEBUG, logger="a3_proxy")

    def lines():
        found = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "a3_proxy"]
        caplog.clear()
        return found
    return lines
