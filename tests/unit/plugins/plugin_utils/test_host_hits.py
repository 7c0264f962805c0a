# -*- coding: utf-8 -*-
"""_host.port_hits: the "any" flag of a wanted port as a template may pass it (bool or text, any case) decides
whether a listener on another address clashes; the whole hit is pinned."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import port_hits

SS = 'LISTEN 0 4096 127.30.0.11:2379 0.0.0.0:* users:(("etcd",pid=101,fd=7))\n'
HIT = [{"port": 2379, "address": "127.30.0.11", "what": "etcd client port", "owners": [{"name": "etcd", "pid": "101"}]}]


@pytest.mark.parametrize("flag,hits", [
    (True, HIT), ("true", HIT), ("True", HIT), ("yes", HIT), (" YES ", HIT), ("on", HIT), ("ON", HIT), ("1", HIT),
    (1, HIT), (False, []), ("false", []), ("no", []), ("off", []), ("0", []), (0, []), (None, []), ("", []),
])
def test_any_address_clashes_only_when_the_flag_is_true(flag, hits):
    wanted = [{"first": 2379, "last": 2379, "any": flag, "what": "etcd client port"}]
    assert port_hits(SS, wanted, ["127.30.0.12", "0.0.0.0"]) == hits


def test_a_missing_flag_reads_as_false():
    assert port_hits(SS, [{"first": 2000, "last": 3000, "what": "etcd client port"}], ["127.30.0.12"]) == []
    assert port_hits(SS, [{"first": 2000, "last": 3000, "what": "etcd client port"}], ["127.30.0.11"]) == HIT
