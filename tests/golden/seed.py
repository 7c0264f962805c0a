# -*- coding: utf-8 -*-
"""The seed's values (tests/golden/seed_values.yml, a transcription of the deployment procedure
"在 Atlas 800 A3 上使用 PD 分离方式部署 GLM-5.1-w8a8"), read in the shapes test_seed.py compares the
render with, and parse_flags for the render's own command lines."""
from __future__ import annotations

from pathlib import Path

import yaml

VALUES = Path(__file__).resolve().parent / "seed_values.yml"


def parse_flags(tokens):
    """['--a', 'x', '--b', '--c', 'y'] -> {'a': 'x', 'b': True, 'c': 'y'} (order kept)."""
    out, i = {}, 0
    while i < len(tokens):
        flag = tokens[i]
        assert flag.startswith("--"), "not a flag: %r in %r" % (flag, tokens)
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            out[flag[2:]] = tokens[i + 1]
            i += 2
        else:
            out[flag[2:]] = True
            i += 1
    return out


class Seed:
    """Accessors over seed_values.yml; each returns a fresh copy, so a test may change what it gets."""

    def __init__(self, path: Path = VALUES):
        self.path = path
        self.values = yaml.safe_load(path.read_text(encoding="utf-8"))

    def _get(self, *keys):
        value = self.values
        for key in keys:
            value = value[key]
        return yaml.safe_load(yaml.safe_dump(value, allow_unicode=True))

    def engine_script(self, side: str):
        """run_dp_template.sh of a side: (env {name: value}, unset [names], model, serve flags)."""
        eng = self._get("engine", side)
        return eng["env"], eng["unset"], eng["model"], eng["serve_flags"]

    def launcher_args(self):
        """The flags of the four `python launch_online_dp.py ...` lines, node 0..3."""
        return self._get("launcher")

    def proxy_args(self):
        """({argument: [values]}, [unset names]) of the proxy's command line."""
        return self._get("proxy", "args"), self._get("proxy", "unset")

    def etcd_args(self):
        return self._get("etcd")

    def dscli_args(self):
        """([numactl arguments before -w], {worker flag: value})."""
        return self._get("dscli", "numa"), self._get("dscli", "flags")

    def docker_run(self):
        return self._get("docker_run")

    def hugepages_pages(self, page: str):
        assert page == "2M", "the seed's values hold the 2M page count only"
        return self._get("hugepages_2m_pages")

    def pip_pins(self):
        return self._get("pip_pins")
