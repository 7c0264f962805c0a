# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/preflight.py, called through FilterModule().filters() as Ansible calls it:
the parsers under their names, preflight_host's judgement of a read that did not run, and every error of the
judgement (missing settings, wrong types, unreadable sizes) as one AnsibleFilterError naming the cause."""
from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.preflight import FilterModule  # noqa: E402
from helpers import FreshFilters  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _host as H  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import SETTINGS  # noqa: E402


FILTERS = FreshFilters(FilterModule)


@pytest.mark.parametrize("name,function", [
    ("meminfo", H.parse_meminfo), ("sections", H.parse_sections), ("stat_types", H.parse_stat),
    ("cann_version", H.cann_version), ("reported_version", H.reported_version), ("port_hits", H.port_hits),
])
def test_each_parser_is_registered_under_its_name(name, function):
    assert FILTERS[name] is function


def test_no_other_name_is_registered():
    assert sorted(FILTERS) == ["cann_version", "meminfo", "port_hits", "preflight_host", "reported_version",
                               "sections", "stat_types"]


def test_a_read_that_did_not_run_is_one_problem():
    assert FILTERS["preflight_host"]({"msg": "unreachable"}, {"inventory_hostname": "p0"}) == {
        "problems": ["p0 [host] the host read (getconf, /proc/meminfo, version files, stat, ip, ss, docker) did not run "
                     "on this node (unreachable): every host check needs it; check that the node is up and that Ansible "
                     "can run commands on it (ansible p0 -m ansible.builtin.command -a true)"],
        "advisories": [], "versions": {"hdk": "", "cann": "", "cann_file": ""}}


READ = {"stdout": "@@page_size\n4096\n@@rc 0\n"}


def test_missing_settings_are_a_filter_error_naming_them():
    settings = dict.fromkeys(SETTINGS[1:])
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["preflight_host"](READ, settings)
    assert err.value.message == "preflight_host: 'preflight host settings lack inventory_hostname'"


def test_settings_of_the_wrong_type_are_a_filter_error():
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["preflight_host"]({}, None)
    assert err.value.message == "preflight_host: 'NoneType' object is not subscriptable"


def test_an_unreadable_size_is_a_filter_error():
    settings = dict.fromkeys(SETTINGS, "")
    settings.update(inventory_hostname="p0", preflight_node={}, preflight_page_size=4096, preflight_memory_check=True,
                    hugepages_target="lots", container_shm_size="1G", preflight_memory_reserve="0",
                    preflight_port_check=False)
    read = {"stdout": "@@page_size\n4096\n@@rc 0\n@@meminfo\nMemTotal: 1024 kB\n@@rc 0\n"}
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["preflight_host"](read, settings)
    assert err.value.message == ("preflight_host: cannot read size 'lots': use a number with a unit, e.g. 500G, 1T, "
                                 "128M")
