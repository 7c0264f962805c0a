# -*- coding: utf-8 -*-
"""hacking/build_collection.py: the publisher's repository URL goes into the copy's galaxy.yml, once."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hacking"))

import build_collection  # noqa: E402  (after the path)

ROOT = Path(__file__).resolve().parents[2]


def test_repository_is_added_to_the_real_galaxy_yml():
    text = (ROOT / "galaxy.yml").read_text(encoding="utf-8")
    assert "repository" not in yaml.safe_load(text)  # the publisher's to give, not the source's
    out = yaml.safe_load(build_collection.with_repository(text, "https://git.example.org/a/b"))
    assert out["repository"] == "https://git.example.org/a/b"
    assert {k: v for k, v in out.items() if k != "repository"} == yaml.safe_load(text)


def test_repository_is_replaced_not_repeated():
    text = "namespace: a\nrepository: https://old.example.org/x\nname: b"
    out = build_collection.with_repository(text, "https://new.example.org/y")
    assert out.count("repository:") == 1 and yaml.safe_load(out)["repository"] == "https://new.example.org/y"
    assert yaml.safe_load(out)["name"] == "b"


@pytest.mark.parametrize("url", ["", "git@host:a/b", "ftp://example.org/x", "https://", "https://a b.org/x"])
def test_urls_galaxy_refuses(url):
    with pytest.raises(SystemExit):
        build_collection.check_url(url)


def test_url_accepted():
    assert build_collection.check_url("https://example.invalid/ascend/vllm_pd") == "https://example.invalid/ascend/vllm_pd"
