# -*- coding: utf-8 -*-
"""Which etcd member the yuanrong role reads (roles/yuanrong/vars/main.yml): the registration wait runs on the first
member still in the play and reads that member's own client URL; the restart's revision read gets every member."""
from __future__ import annotations

import pytest

from helpers import render_role_vars

MEMBERS = ["p1", "d0", "p0"]
ENDPOINTS = ["127.0.43.2:2379", "127.0.44.1:2379", "127.0.43.1:2379"]
CLUSTER = {"etcd_host": "p1", "etcd_hosts": MEMBERS, "etcd_endpoints": ENDPOINTS}
SINGLE = {"etcd_host": "p0", "etcd_hosts": ["p0"], "etcd_endpoints": ["127.0.43.1:2379"]}
PLAY = ["p0", "p1", "d0", "d1"]
CASES = [
    # (a3, play hosts, etcd_tls) -> (reader, its URL, every URL)
    ((CLUSTER, PLAY, False), ("p1", "http://127.0.43.2:2379",
                              ["http://127.0.43.2:2379", "http://127.0.44.1:2379", "http://127.0.43.1:2379"])),
    ((CLUSTER, ["p0", "d0", "d1"], False), ("d0", "http://127.0.44.1:2379", None)),   # p1 down or unreachable
    ((CLUSTER, ["p0", "d1"], True), ("p0", "https://127.0.43.1:2379", None)),
    ((CLUSTER, ["d1"], False), ("p1", "http://127.0.43.2:2379", None)),   # no member in the play: the first
    ((SINGLE, PLAY, False), ("p0", "http://127.0.43.1:2379", ["http://127.0.43.1:2379"])),
]


@pytest.fixture(scope="module")
def rendered():
    files = ("roles/common/defaults/main.yml", "roles/yuanrong/defaults/main.yml", "roles/yuanrong/vars/main.yml")
    cases = [{"a3": a3, "ansible_play_hosts": play, "etcd_tls": tls} for (a3, play, tls), _unused in CASES]
    return render_role_vars(files, cases, ("yuanrong_etcd_reader", "yuanrong_etcd_url", "yuanrong_etcd_urls"))


@pytest.mark.parametrize("index", range(len(CASES)))
def test_the_wait_reads_the_first_member_in_the_play(rendered, index):
    reader, url, urls = CASES[index][1]
    got = rendered[index]
    assert got[:2] == [reader, url]
    if urls is not None:
        assert got[2] == urls
