# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/sizes.py, called through FilterModule().filters() as Ansible calls it:
each filter's value for the sizes the inventory writes, and the one AnsibleFilterError of an unreadable size."""
from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.sizes import FilterModule  # noqa: E402
from helpers import FreshFilters  # noqa: E402


FILTERS = FreshFilters(FilterModule)


def test_the_filters_are_registered_under_their_names():
    assert sorted(FILTERS) == ["docker_size", "size_bytes", "size_gib", "size_mib"]


@pytest.mark.parametrize("value,gib,mib,size_bytes,docker", [
    ("500G", 500, 512000, 536870912000, "500g"),
    ("1T", 1024, 1048576, 1099511627776, "1024g"),
    ("128M", 0, 128, 134217728, "128m"),
    ("2048 kB", 0, 2, 2097152, "2m"),
    (3221225472, 3, 3072, 3221225472, "3g"),
])
def test_each_filter_of_a_size(value, gib, mib, size_bytes, docker):
    assert (FILTERS["size_gib"](value), FILTERS["size_mib"](value), FILTERS["size_bytes"](value),
            FILTERS["docker_size"](value)) == (gib, mib, size_bytes, docker)


@pytest.mark.parametrize("name", ["size_gib", "size_mib", "size_bytes", "docker_size"])
def test_an_unreadable_size_is_a_filter_error_with_the_reason(name):
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS[name]("lots")
    assert err.value.message == "cannot read size 'lots': use a number with a unit, e.g. 500G, 1T, 128M"
