# -*- coding: utf-8 -*-
"""Whole-result pins of plugins/module_utils/_npu_smi.py: the parsed table, the warnings, the errors and the
judgement of the chips.

The real A3 dump (tests/fixtures/npu-smi_info_a3_idle.txt) is pinned chip by chip; small tables pin each row
kind the parser knows (NPU row, chip row, process row, headers, version line) and each warning text.
"""

from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._npu_smi import (
    NpuSmiParseError,
    chip_label,
    evaluate_chips,
    parse_npu_smi_info,
    run_npu_smi,
)

# (phy_id, npu, chip, power_w, temp_c, hbm_used_mb, bus) of the A3 dump
A3 = [
    (0, 0, 0, 174.3, 37, 3440, '9D'), (1, 0, 1, None, 36, 3205, '9F'),
    (2, 1, 0, 184.0, 37, 3432, '99'), (3, 1, 1, None, 37, 3208, '9B'),
    (4, 2, 0, 176.8, 36, 3443, '95'), (5, 2, 1, None, 36, 3196, '97'),
    (6, 3, 0, 188.1, 36, 3433, '91'), (7, 3, 1, None, 36, 3210, '93'),
    (8, 4, 0, 175.2, 37, 3439, '8D'), (9, 4, 1, None, 36, 3205, '8F'),
    (10, 5, 0, 177.1, 36, 3433, '89'), (11, 5, 1, None, 36, 3205, '8B'),
    (12, 6, 0, 176.9, 35, 3452, '85'), (13, 6, 1, None, 34, 3194, '87'),
    (14, 7, 0, 183.1, 35, 3447, '81'), (15, 7, 1, None, 37, 3192, '83'),
]


def chip(**fields):
    out = {'npu': None, 'chip': None, 'phy_id': None, 'name': None, 'health': None, 'power_w': None, 'temp_c': None,
           'hugepages_used': None, 'hugepages_total': None, 'aicore_pct': None, 'memory_used_mb': None,
           'memory_total_mb': None, 'hbm_used_mb': None, 'hbm_total_mb': None, 'bus_id': None}
    out.update(fields)
    return out


def a3_chip(phy, npu, number, power, temp, hbm, bus):
    return chip(npu=npu, chip=number, phy_id=phy, name='Ascend910', health='OK', power_w=power, temp_c=temp,
                hugepages_used=0, hugepages_total=0, aicore_pct=0, memory_used_mb=0, memory_total_mb=0,
                hbm_used_mb=hbm, hbm_total_mb=65536, bus_id='0000:%s:00.0' % bus)


def test_a3_dump_whole_result(fixture_text):
    info = parse_npu_smi_info(fixture_text('npu-smi_info_a3_idle.txt'))
    assert info == {'version': '24.1.rc3.7', 'chips': [a3_chip(*row) for row in A3], 'processes': [],
                    'warnings': []}
    assert isinstance(info['chips'][0]['power_w'], float) and isinstance(info['chips'][0]['temp_c'], int)
    assert isinstance(info['chips'][2]['power_w'], float)


HEAD = ('| npu-smi 25.0.rc1              Version: 25.0.rc1                     |\n'
        '| NPU   Name       | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n'
        '| Chip  Phy-ID     | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n'
        '+==================+===============+====================================================+\n')


def parse(body, head=HEAD):
    return parse_npu_smi_info(head + body)


def test_na_bus_id_after_an_npu_row_is_the_chip_row():
    info = parse('| 3     Ascend910  | Critical      | 90.5        41.0              2    / 8             |\n'
                 '| 1     7          | NA            | 12.0        100 / 200         300 / 400            |\n')
    assert info == {'version': '25.0.rc1', 'processes': [], 'warnings': [], 'chips': [chip(
        npu=3, chip=1, phy_id=7, name='Ascend910', health='Critical', power_w=90.5, temp_c=41, hugepages_used=2,
        hugepages_total=8, aicore_pct=12, memory_used_mb=100, memory_total_mb=200, hbm_used_mb=300,
        hbm_total_mb=400)]}


def test_usage_columns_follow_the_second_header():
    head = ('| NPU   Name       | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n'
            '| Chip  Phy-ID     | Bus-Id        | AICore(%)   HBM-Usage(MB)     Memory-Usage(MB)     |\n')
    info = parse('| 0     Ascend910  | OK            | 1.5         2                 3    / 4             |\n'
                 '| 0     0          | 0000:01:00.0  | 5           6    / 7          8    / 9             |\n', head)
    assert info['chips'] == [chip(npu=0, chip=0, phy_id=0, name='Ascend910', health='OK', power_w=1.5, temp_c=2,
                                  hugepages_used=3, hugepages_total=4, aicore_pct=5, hbm_used_mb=6, hbm_total_mb=7,
                                  memory_used_mb=8, memory_total_mb=9, bus_id='0000:01:00.0')]
    assert info['version'] is None and info['warnings'] == []


def test_a_first_header_row_never_sets_the_usage_columns():
    # the NPU header names Hugepages-Usage only; a Chip header naming only Hugepages leaves the default order
    head = ('| NPU   Name       | Health        | Power(W)    HBM-Usage(MB)   Memory-Usage(MB)  |\n'
            '| Chip  Phy-ID     | Bus-Id        | AICore(%)   Hugepages-Usage(page)             |\n')
    info = parse('| 0     X          | OK            | 1           2                                 |\n'
                 '| 0     0          | 0000:01:00.0  | 5           6    / 7          8    / 9     |\n', head)
    got = info['chips'][0]
    assert (got['memory_used_mb'], got['memory_total_mb'], got['hbm_used_mb'], got['hbm_total_mb']) == (6, 7, 8, 9)


def test_a_short_header_starts_the_chip_section():
    info = parse_npu_smi_info('| NPU  Name | Health |\n| 0 910B | OK |\n')
    assert info == {'version': None, 'processes': [], 'chips': [chip(npu=0, name='910B', health='OK')],
                    'warnings': ['line 2: NPU 0 has no chip row; chip fields left empty']}


def test_every_warning_text():
    body = ('| 0     0          | 0000:01:00.0  | 0           0 / 0             0 / 0                |\n'
            '| 5 |\n'
            '| 1     Ascend910  | OK            | zz          30                0    / 0             |\n'
            '| 2     Ascend910  | OK            | 10          30                0    / 0             |\n'
            '| x     0          | 0000:02:00.0  | 0                                                  |\n'
            'garbage line\n'
            '| hello | world |\n'
            '| 3     Ascend910  | OK            |                                                    |\n'
            '| 1     6          | 0000:03:00.0  | 0           0 / 0             0 / 0                |\n'
            '| NPU     Chip     | Process id    | Process name             | Process memory(MB)      |\n'
            '| 3     1          | 77            |\n'
            '| 3     1          | pid           | python                   | 10                      |\n'
            '| 3                | 88            |                          | NA                      |\n'
            '| No running processes found in NPU 4 |\n')
    info = parse(body)
    assert info['warnings'] == [
        "line 5: chip row without an NPU row before it: '| 0     0          | 0000:01:00.0  | 0           0 / 0   "
        "          0 / 0                |'",
        "line 6: too few columns: '| 5 |'",
        "line 7: unreadable NPU row (could not convert string to float: 'zz'): '| 1     Ascend910  | OK            "
        "| zz          30                0    / 0             |'",
        "line 9: unexpected row: '| x     0          | 0000:02:00.0  | 0                                       "
        "           |'",
        "line 10: not a table line: 'garbage line'",
        "line 11: unexpected row: '| hello | world |'",
        "line 15: unreadable process row: '| 3     1          | 77            |'",
        "line 16: unreadable process row (invalid literal for int() with base 10: 'pid'): '| 3     1          "
        "| pid           | python                   | 10                      |'",
    ]
    # the unreadable row after NPU 2 was its chip row: NPU 2 is dropped (warned once), not kept half empty
    assert info['chips'] == [
        chip(npu=3, chip=1, phy_id=6, name='Ascend910', health='OK', bus_id='0000:03:00.0', aicore_pct=0,
             memory_used_mb=0,
             memory_total_mb=0, hbm_used_mb=0, hbm_total_mb=0),
    ]
    assert info['processes'] == [{'npu': 3, 'chip': None, 'pid': 88, 'name': None, 'memory_mb': None}]


def test_an_npu_row_followed_by_another_keeps_the_first_without_chip_fields():
    info = parse('| 0     Ascend910  | Warning       | 5           6                 1    / 2             |\n'
                 '| 1     Ascend910  | OK            | 7           8                 3    / 4             |\n'
                 '| 0     2          | 0000:01:00.0  | 9           1 / 2             3 / 4                |\n')
    assert info['warnings'] == ['line 6: NPU 0 has no chip row; chip fields left empty']
    assert info['chips'] == [
        chip(npu=0, name='Ascend910', health='Warning', power_w=5.0, temp_c=6, hugepages_used=1, hugepages_total=2),
        chip(npu=1, chip=0, phy_id=2, name='Ascend910', health='OK', power_w=7.0, temp_c=8, hugepages_used=3,
             hugepages_total=4, aicore_pct=9, memory_used_mb=1, memory_total_mb=2, hbm_used_mb=3, hbm_total_mb=4,
             bus_id='0000:01:00.0')]


def test_a_long_line_is_cut_in_the_warning():
    line = '| x ' + 'y' * 300 + ' |'
    info = parse(line + '\n')
    assert info['warnings'] == ['line 5: unexpected row: %r' % line[:160], 'npu-smi printed a version but no chips']


def test_unreadable_chip_row_drops_that_chip():
    info = parse('| 0     Ascend910  | OK            | 1           2                 0    / 0             |\n'
                 '| 0     q          | 0000:01:00.0  | 0           0 / 0             0 / 0                |\n'
                 '+------------------+---------------+----------------------------------------------------+\n'
                 '| 1     Ascend910  | OK            | 1           2                 0    / 0             |\n'
                 '| 0     2          | 0000:02:00.0  | x           0 / 0             0 / 0                |\n')
    assert info['chips'] == []
    assert info['warnings'] == [
        "line 6: unreadable chip row (invalid literal for int() with base 10: 'q'): '| 0     q          "
        "| 0000:01:00.0  | 0           0 / 0             0 / 0                |'",
        "line 9: unreadable chip row (invalid literal for int() with base 10: 'x'): '| 0     2          "
        "| 0000:02:00.0  | x           0 / 0             0 / 0                |'",
        'npu-smi printed a version but no chips',
    ]


def test_version_forms():
    assert parse_npu_smi_info('| npu-smi 24.1.rc3 |\n')['version'] == '24.1.rc3'
    assert parse_npu_smi_info('| npu-smi 1.0  Version: 2.0 |\n| npu-smi 3.0 |\n')['version'] == '2.0'
    info = parse_npu_smi_info('| smi 2 |\n| Version: 9 |\n' + HEAD[HEAD.index('\n') + 1:]
                              + '| 0  A | OK | 1 2 0 / 0 |\n| 0  0 | 0000:01:00.0 | 0 0 / 0 0 / 0 |\n')
    assert info['version'] is None
    assert info['warnings'] == ["line 1: unexpected row: '| smi 2 |'", "line 2: unexpected row: '| Version: 9 |'"]
    assert [c['phy_id'] for c in info['chips']] == [0]


@pytest.mark.parametrize('text,message', [
    ('', 'no chip table in npu-smi output (empty output)'),
    (None, 'no chip table in npu-smi output (empty output)'),
    (' \n \n', 'no chip table in npu-smi output (empty output)'),
    ('a\n b \nc\nd\ne\nf\n', 'no chip table in npu-smi output: a | b | c | d | e'),
    ('dcmi module initialize failed. ret is -8005\n',
     'no chip table in npu-smi output: dcmi module initialize failed. ret is -8005'),
])
def test_nothing_parseable_messages(text, message):
    with pytest.raises(NpuSmiParseError) as err:
        parse_npu_smi_info(text)
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)


def test_single_character_pipe_is_not_a_row():
    with pytest.raises(NpuSmiParseError):
        parse_npu_smi_info('|\n')


def test_processes_and_idle_npus():
    body = ('| 0     Ascend910  | OK            | 1           2                 0    / 0             |\n'
            '| 0     0          | 0000:01:00.0  | 0           0 / 0             0 / 0                |\n'
            '+==================+===============+====================================================+\n'
            '| NPU     Chip     | Process id    | Process name             | Process memory(MB)      |\n'
            '| 0       0        | 1234          | python3                  | 30000                   |\n'
            '| 0       1        | 5678          |                          | 28000.0                 |\n'
            '| No running processes found in NPU 1                                                  |\n')
    info = parse(body)
    assert info['processes'] == [
        {'npu': 0, 'chip': 0, 'pid': 1234, 'name': 'python3', 'memory_mb': 30000},
        {'npu': 0, 'chip': 1, 'pid': 5678, 'name': None, 'memory_mb': 28000},
    ]
    assert info['warnings'] == []
    assert len(info['chips']) == 1


def test_no_process_line_switches_to_the_process_section():
    body = ('| 0     Ascend910  | OK            | 1           2                 0    / 0             |\n'
            '| 0     0          | 0000:01:00.0  | 0           0 / 0             0 / 0                |\n'
            '| No running processes found in NPU 0 |\n'
            '| 1       0        | 99            | vllm                     | 7                       |\n')
    info = parse(body)
    assert info['processes'] == [{'npu': 1, 'chip': 0, 'pid': 99, 'name': 'vllm', 'memory_mb': 7}]
    assert [c['phy_id'] for c in info['chips']] == [0]


def test_na_values_read_as_none():
    info = parse('| 0     Ascend910  | OK            | NA          --                -    / NA            |\n'
                 '| 0     0          | 0000:01:00.0  | na          NA / N/A          -- / -               |\n')
    assert info['chips'] == [chip(npu=0, chip=0, phy_id=0, name='Ascend910', health='OK', bus_id='0000:01:00.0')]


def test_data_row_before_any_header():
    info = parse_npu_smi_info('| npu-smi 1.0 Version: 1.0 |\n| 0  A | OK | 1 |\n')
    assert info['warnings'] == ["line 2: data row before any column header: '| 0  A | OK | 1 |'",
                                'npu-smi printed a version but no chips']


# --------------------------------------------------------------------------
# evaluate_chips
# --------------------------------------------------------------------------

def small_chips():
    return [chip(npu=0, chip=0, phy_id=0, health='OK', hbm_used_mb=40000, hbm_total_mb=65536),
            chip(npu=0, chip=1, phy_id=1, health='Alarm', hbm_used_mb=8192, hbm_total_mb=65536),
            chip(npu=1, chip=0, health='OK', hbm_used_mb=9000, hbm_total_mb=None),
            chip(npu=1, chip=1, phy_id=3, health='OK', hbm_used_mb=None)]


PROCS = [{'npu': 0, 'chip': 1, 'pid': 1234, 'name': 'python3', 'memory_mb': 30000},
         {'npu': 9, 'chip': 0, 'pid': 55, 'name': 'x', 'memory_mb': 1},
         {'npu': 1, 'chip': 1, 'pid': 42, 'name': 'vllm', 'memory_mb': 5}]


def test_evaluate_whole_result_warn_policy():
    failures, warnings = evaluate_chips(small_chips(), '4', PROCS, own_pids=['42'], hbm_used_limit_mb=8192)
    assert failures == [
        {'check': 'chip_count', 'msg': 'only 3 of 4 chips report health OK, 4 required'},
        {'check': 'health', 'npu': 0, 'chip': 1, 'phy_id': 1,
         'msg': 'phy-id 1 (NPU 0 chip 1) health is Alarm, expected OK'},
    ]
    assert warnings == [
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 1, 'phy_id': 1, 'pid': 1234,
         'msg': 'phy-id 1 (NPU 0 chip 1): process 1234 (python3) holds 30000 MB of HBM'},
        {'check': 'hbm_in_use', 'npu': 9, 'chip': 0, 'phy_id': None, 'pid': 55,
         'msg': 'NPU 9 chip 0: process 55 (x) holds 1 MB of HBM'},
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 0, 'phy_id': 0, 'pid': None,
         'msg': 'phy-id 0 (NPU 0 chip 0) uses 40000 of 65536 MB HBM (limit for an idle chip 8192 MB) '
                'with no process listed'},
        {'check': 'hbm_in_use', 'npu': 1, 'chip': 0, 'phy_id': None, 'pid': None,
         'msg': 'NPU 1 chip 0 uses 9000 of None MB HBM (limit for an idle chip 8192 MB) with no process listed'},
    ]


def test_evaluate_fail_and_ignore_policies():
    failures, warnings = evaluate_chips(small_chips(), 3, PROCS[:1], hbm_in_use_policy='fail', hbm_used_limit_mb=9000)
    assert warnings == []
    assert failures == [
        {'check': 'health', 'npu': 0, 'chip': 1, 'phy_id': 1,
         'msg': 'phy-id 1 (NPU 0 chip 1) health is Alarm, expected OK'},
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 1, 'phy_id': 1, 'pid': 1234,
         'msg': 'phy-id 1 (NPU 0 chip 1): process 1234 (python3) holds 30000 MB of HBM'},
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 0, 'phy_id': 0, 'pid': None,
         'msg': 'phy-id 0 (NPU 0 chip 0) uses 40000 of 65536 MB HBM (limit for an idle chip 9000 MB) '
                'with no process listed'},
    ]
    assert evaluate_chips(small_chips(), None, PROCS, hbm_in_use_policy='ignore', hbm_used_limit_mb=0) == (
        [{'check': 'health', 'npu': 0, 'chip': 1, 'phy_id': 1,
          'msg': 'phy-id 1 (NPU 0 chip 1) health is Alarm, expected OK'}], [])


def test_evaluate_without_processes_or_limit():
    chips = [chip(npu=0, chip=0, phy_id=0, health='OK', hbm_used_mb=60000)]
    assert evaluate_chips(chips, 1, None) == ([], [])
    assert evaluate_chips(chips, 1, [], own_pids=None, hbm_used_limit_mb=60000) == ([], [])
    assert evaluate_chips(chips, 0, []) == ([], [])
    assert evaluate_chips([], 0, []) == ([], [])
    assert evaluate_chips([], 1, []) == ([{'check': 'chip_count',
                                           'msg': 'only 0 of 0 chips report health OK, 1 required'}], [])
    # health is compared exactly: 'ok' is not OK
    assert evaluate_chips([chip(npu=2, chip=0, health='ok')], 1, [])[0] == [
        {'check': 'chip_count', 'msg': 'only 0 of 1 chips report health OK, 1 required'},
        {'check': 'health', 'npu': 2, 'chip': 0, 'phy_id': None, 'msg': 'NPU 2 chip 0 health is ok, expected OK'}]


def test_evaluate_own_process_on_a_chip_suppresses_only_its_chip():
    chips = [chip(npu=0, chip=0, phy_id=0, health='OK', hbm_used_mb=50000, hbm_total_mb=65536),
             chip(npu=0, chip=1, phy_id=1, health='OK', hbm_used_mb=50000, hbm_total_mb=65536)]
    procs = [{'npu': 0, 'chip': 0, 'pid': 7, 'name': 'vllm', 'memory_mb': 49000}]
    assert evaluate_chips(chips, 2, procs, own_pids=[7], hbm_used_limit_mb=1000) == ([], [
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 1, 'phy_id': 1, 'pid': None,
         'msg': 'phy-id 1 (NPU 0 chip 1) uses 50000 of 65536 MB HBM (limit for an idle chip 1000 MB) '
                'with no process listed'}])


def test_evaluate_bad_policy_message():
    with pytest.raises(ValueError) as err:
        evaluate_chips([], None, [], hbm_in_use_policy='panic')
    assert str(err.value) == "hbm_in_use_policy must be one of warn, fail, ignore, got 'panic'"


def test_chip_label_forms():
    assert chip_label({'npu': 1, 'chip': 0, 'phy_id': 0}) == 'phy-id 0 (NPU 1 chip 0)'
    assert chip_label({'npu': 1, 'chip': 0, 'phy_id': None}) == 'NPU 1 chip 0'
    assert chip_label({}) == 'NPU None chip None'


def test_run_npu_smi_passes_argv_and_timeout():
    calls = []

    def runner(argv, timeout):
        calls.append((argv, timeout))
        return 3, 'out', 'err'
    assert run_npu_smi('/usr/bin/npu-smi', runner, 7) == (3, 'out', 'err', ['/usr/bin/npu-smi', 'info'])
    assert calls == [(['/usr/bin/npu-smi', 'info'], 7)]


def test_the_shortest_rows():
    info = parse_npu_smi_info('| npu-smi 1.0 Version: 1.0 |\n|\n||\n')
    assert info['warnings'] == ["line 2: not a table line: '|'", "line 3: unexpected row: '||'",
                                'npu-smi printed a version but no chips']


def test_large_integers_are_read_exactly():
    info = parse('| 0     Ascend910  | OK            | 1           2                 0    / 0             |\n'
                 '| 0     0          | 0000:01:00.0  | 0           0 / 0             12345678901234567891 / 9    |\n')
    assert info['chips'][0]['hbm_used_mb'] == 12345678901234567891


def test_hbm_limit_skips_chips_whose_process_was_reported():
    chips = [chip(npu=0, chip=0, phy_id=0, health='OK', hbm_used_mb=50000, hbm_total_mb=65536),
             chip(npu=0, chip=1, phy_id=1, health='OK', hbm_used_mb=50000, hbm_total_mb=65536)]
    procs = [{'npu': 0, 'chip': 0, 'pid': 7, 'name': 'vllm', 'memory_mb': 49000},
             {'npu': 0, 'chip': 1, 'pid': 8, 'name': 'other', 'memory_mb': 49000}]
    # our process 7 comes first: the foreign one after it is still reported, once (not again by the limit)
    assert evaluate_chips(chips, 2, procs, own_pids=[7], hbm_used_limit_mb=1000) == ([], [
        {'check': 'hbm_in_use', 'npu': 0, 'chip': 1, 'phy_id': 1, 'pid': 8,
         'msg': 'phy-id 1 (NPU 0 chip 1): process 8 (other) holds 49000 MB of HBM'}])


def test_an_npu_row_left_pending_across_the_process_table_is_kept():
    text = ('| NPU  Name | Health | Power(W) |\n'
            '| 0  A | OK | 1 2 0 / 0 |\n'
            '| NPU  Chip | Process id | Process name | Process memory(MB) |\n'
            '| 0  0 | 77 |\n'
            '| NPU  Name | Health | Power(W) |\n'
            '+-----+\n')
    info = parse_npu_smi_info(text)
    assert info['warnings'] == ["line 4: unreadable process row: '| 0  0 | 77 |'",
                                'line 6: NPU 0 has no chip row; chip fields left empty']
    assert info['chips'] == [chip(npu=0, name='A', health='OK', power_w=1.0, temp_c=2, hugepages_used=0,
                                  hugepages_total=0)]


def test_rows_without_padding_and_sparse_cells():
    text = ('|NPU Name|Health|Power(W) Temp(C) Hugepages-Usage(page)|\n'
            '|Chip Phy-ID|Bus-Id|AICore(%) Memory-Usage(MB) HBM-Usage(MB)|\n'
            '|3 Ascend 910B3|OK|90.5 41 2 / 8|\n'
            '|1 7|0000:01:00.0|12 100 / 200 300 / 409|\n'
            '|4 Ascend910|OK|174.3|\n'
            '|0 8|0000:02:00.0|\n'
            '|5 Ascend910|OK|0 / 4|\n'
            '|0 9|0000:03:00.0|1 / 2 3 / 4|\n')
    assert parse_npu_smi_info(text) == {'version': None, 'processes': [], 'warnings': [], 'chips': [
        chip(npu=3, chip=1, phy_id=7, name='Ascend 910B3', health='OK', power_w=90.5, temp_c=41, hugepages_used=2,
             hugepages_total=8, aicore_pct=12, memory_used_mb=100, memory_total_mb=200, hbm_used_mb=300,
             hbm_total_mb=409, bus_id='0000:01:00.0'),
        chip(npu=4, chip=0, phy_id=8, name='Ascend910', health='OK', power_w=174.3, bus_id='0000:02:00.0'),
        chip(npu=5, chip=0, phy_id=9, name='Ascend910', health='OK', hugepages_used=0, hugepages_total=4,
             memory_used_mb=1, memory_total_mb=2, hbm_used_mb=3, hbm_total_mb=4, bus_id='0000:03:00.0'),
    ]}


def test_lines_not_closed_by_a_pipe_are_not_table_lines():
    info = parse_npu_smi_info('| npu-smi 1.0 Version: 1.0 |\n| 0 A | OK\n0 A | OK |\n')
    assert info['warnings'] == ["line 2: not a table line: '| 0 A | OK'", "line 3: not a table line: '0 A | OK |'",
                                'npu-smi printed a version but no chips']


def test_usage_columns_after_hugepages_and_a_lone_npu_header():
    head = ('| NPU   Name       | Health        | Power(W)    Temp(C)                                |\n'
            '| Chip  Phy-ID     | Bus-Id        | Hugepages-Usage(page) HBM-Usage(MB) Memory-Usage(MB) |\n')
    rows = ('| 0     Ascend910  | OK            | 1           2                                  |\n'
            '| 0     0          | 0000:01:00.0  | 5           6    / 7          8    / 9             |\n')
    got = parse(rows, head)['chips'][0]
    assert (got['hbm_used_mb'], got['hbm_total_mb'], got['memory_used_mb'], got['memory_total_mb']) == (6, 7, 8, 9)
    # an NPU header naming usage columns does not set their order: memory first
    lone = '| NPU   Name       | Health        | AICore(%) HBM-Usage(MB) Memory-Usage(MB)           |\n'
    got = parse(rows, lone)['chips'][0]
    assert (got['memory_used_mb'], got['memory_total_mb'], got['hbm_used_mb'], got['hbm_total_mb']) == (6, 7, 8, 9)
