# -*- coding: utf-8 -*-
"""_preflight.judge_host: the Jinja semantics the checks keep (Ansible's bool filter on the check switches, Jinja's
int filter on the page sizes, every digit of a long number kept), the memory check at its boundary and its rounding,
and the message of missing settings, with whole messages."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import judge_host_read

from test_preflight_host import read, settings

NIC_FAILED = "p0 [host/nic] ip -o addr show failed (): install iproute2"


@pytest.mark.parametrize("switch,checked", [
    (True, True), ("yes", True), ("YES", True), ("on", True), (" On ", True), ("1", True), (1, True), ("true", True),
    (False, False), (None, False), ("no", False), ("off", False), ("0", False), (0, False), ("", False),
])
def test_a_check_switch_reads_as_ansibles_bool_filter(switch, checked):
    problems = judge_host_read(read(addrs=("", 127)), settings(preflight_nic_check=switch))["problems"]
    assert problems == ([NIC_FAILED] if checked else [])


def page_problem(value, want):
    return ("p0 [host/page_size] getconf PAGE_SIZE is %s, expected %s: the openYuanrong package must match the kernel "
            "page size; use a kernel with %s-byte pages or the matching package and set preflight_page_size"
            % (value, want, want))


@pytest.mark.parametrize("page,want,problems", [
    ("4096", "4096.0", []),                 # a float's integer part, as Jinja's int filter
    ("4096", 4096.0, []),
    (" 4096 ", " 4096 ", []),
    ("unknown", 1, [page_problem("unknown", 1)]),  # unreadable is 0, not 1
    ("unknown", 0, []),
    ("12345678901234567891", 12345678901234567892, [page_problem("12345678901234567891", 12345678901234567892)]),
    ("12345678901234567891", "12345678901234567892", [page_problem("12345678901234567891", "12345678901234567892")]),
    ("12345678901234567891", 12345678901234567891, []),
])
def test_page_sizes_compare_as_jinjas_int_filter(page, want, problems):
    result = read(page_size=(page, 0))
    assert judge_host_read(result, settings(preflight_page_size=want))["problems"] == problems


MEMORY = ("p0 [host/memory] MemTotal is %s GiB, but hugepages_target 1G + container shm 1G%s need %s GiB (seed: 1T of "
          "RAM for 500G + 500g): lower hugepages_target (the shm size and the yuanrong shared memory derive from it) or "
          "add memory")


@pytest.mark.parametrize("total_kb,reserve,problems", [
    ("2097152", "0", []),                                                         # exactly enough
    ("2097151", "0", [MEMORY % (2.0, "", 2.0)]),
    ("1048576", "60M", [MEMORY % (1.0, " + preflight_memory_reserve 60M", 2.1)]),
    ("2158592", "60M", []),
])
def test_memory_is_enough_at_exactly_the_need(total_kb, reserve, problems):
    result = read(meminfo=("MemTotal:       %s kB" % total_kb, 0))
    changes = dict(hugepages_target="1G", container_shm_size="1G", preflight_memory_reserve=reserve)
    assert judge_host_read(result, settings(**changes))["problems"] == problems


def test_every_missing_setting_is_named():
    given = dict((k, v) for k, v in settings().items() if k not in ("preflight_python", "proxy_port"))
    with pytest.raises(KeyError) as err:
        judge_host_read(read(), given)
    assert err.value.args == ("preflight host settings lack preflight_python, proxy_port",)
