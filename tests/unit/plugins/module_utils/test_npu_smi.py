# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/module_utils/_npu_smi.py (no Ansible needed)."""

from __future__ import absolute_import, division, print_function


import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._npu_smi import (
    NpuSmiParseError,
    chip_label,
    evaluate_chips,
    parse_npu_smi_info,
)


@pytest.fixture
def a3_idle(fixture_text):
    return fixture_text('npu-smi_info_a3_idle.txt')


def set_health(text, npu, chip, health):
    """Change the health of the chip record (npu, chip) in an A3 table."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        cells = line.strip().strip('|').split('|')
        nxt = lines[i + 1].strip().strip('|').split('|')
        if len(cells) == 3 and len(nxt) == 3 and cells[1].strip() == 'OK':
            if cells[0].split()[0] == str(npu) and nxt[0].split()[0] == str(chip):
                old = '| OK            |'
                assert old in line
                lines[i] = line.replace(old, '| %-14s|' % health)
                return '\n'.join(lines) + '\n'
    raise AssertionError('chip %s/%s not found' % (npu, chip))


# --------------------------------------------------------------------------
# The real A3 dump
# --------------------------------------------------------------------------

def test_a3_fixture_has_16_chips_with_phy_ids(a3_idle):
    info = parse_npu_smi_info(a3_idle)
    assert info['version'] == '24.1.rc3.7'
    assert [c['phy_id'] for c in info['chips']] == list(range(16))
    assert [(c['npu'], c['chip']) for c in info['chips'][:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(c['health'] == 'OK' for c in info['chips'])
    assert all(c['name'] == 'Ascend910' for c in info['chips'])
    assert info['processes'] == []
    assert info['warnings'] == []


def test_a3_fixture_values(a3_idle):
    chips = parse_npu_smi_info(a3_idle)['chips']
    first, second, last = chips[0], chips[1], chips[15]
    assert first['power_w'] == 174.3
    assert second['power_w'] is None          # printed '-'
    assert first['temp_c'] == 37
    assert (first['hugepages_used'], first['hugepages_total']) == (0, 0)
    assert first['aicore_pct'] == 0
    assert (first['memory_used_mb'], first['memory_total_mb']) == (0, 0)
    assert (first['hbm_used_mb'], first['hbm_total_mb']) == (3440, 65536)
    assert first['bus_id'] == '0000:9D:00.0'
    assert (last['npu'], last['chip'], last['phy_id'], last['hbm_used_mb']) == (7, 1, 15, 3192)
    assert last['bus_id'] == '0000:83:00.0'


def test_a3_fixture_passes_evaluation(a3_idle):
    info = parse_npu_smi_info(a3_idle)
    assert evaluate_chips(info['chips'], 16, info['processes']) == ([], [])


def test_more_chips_required_than_present(a3_idle):
    info = parse_npu_smi_info(a3_idle)
    failures, _unused = evaluate_chips(info['chips'], 17, info['processes'])
    assert [f['check'] for f in failures] == ['chip_count']
    assert '16 of 16' in failures[0]['msg'] and '17 required' in failures[0]['msg']


# --------------------------------------------------------------------------
# Variations
# --------------------------------------------------------------------------

@pytest.mark.parametrize('state', ['Warning', 'Alarm', 'Critical'])
def test_chip_not_ok_fails_naming_phy_id_and_state(a3_idle, state):
    text = set_health(a3_idle, npu=1, chip=1, health=state)
    info = parse_npu_smi_info(text)
    assert info['chips'][3]['health'] == state
    failures, warnings = evaluate_chips(info['chips'], 15, info['processes'])
    assert warnings == []
    assert len(failures) == 1
    assert failures[0]['phy_id'] == 3
    assert 'phy-id 3' in failures[0]['msg'] and state in failures[0]['msg']
    # 15 healthy chips are enough for 15 but not for 16
    failures16, _unused = evaluate_chips(info['chips'], 16, info['processes'])
    assert sorted(f['check'] for f in failures16) == ['chip_count', 'health']


def test_extra_blank_lines_and_crlf(a3_idle):
    text = '\n\n' + a3_idle.replace('\n', '\r\n\r\n') + '\n\n\n'
    info = parse_npu_smi_info(text)
    assert len(info['chips']) == 16
    assert info['warnings'] == []


def test_leading_noise_is_a_warning_not_a_crash(a3_idle):
    text = 'dcmi module initialize warning, ret is -8020\n' + a3_idle
    info = parse_npu_smi_info(text)
    assert len(info['chips']) == 16
    assert len(info['warnings']) == 1 and 'not a table line' in info['warnings'][0]


def test_malformed_rows_are_collected(a3_idle):
    lines = a3_idle.splitlines()
    # break the second row of chip phy-id 2 (temperature/usage cell turned to garbage)
    idx = next(i for i, l in enumerate(lines) if '0000:99:00.0' in l)
    lines[idx] = '| x     2                   | 0000:99:00.0  | zz  |'
    # and a row with a broken number in the first row of phy-id 4
    idx4 = next(i for i, l in enumerate(lines) if l.startswith('| 2     Ascend910'))
    lines[idx4] = lines[idx4].replace('176.8', '17x.8')
    lines.insert(5, '| ??? |')
    info = parse_npu_smi_info('\n'.join(lines))
    phy_ids = [c['phy_id'] for c in info['chips']]
    assert 2 not in phy_ids and 4 not in phy_ids
    assert len(info['chips']) == 14
    assert len(info['warnings']) >= 3
    assert any('unexpected row' in w for w in info['warnings'])


def test_process_rows_and_hbm_policy(a3_idle):
    text = a3_idle.replace(
        '| No running processes found in NPU 0                                                            |',
        '| 0       0                 | 1234          | python3                  | 30000                   |\n'
        '| 0       1                 | 5678          | vllm                     | 28000                   |')
    info = parse_npu_smi_info(text)
    assert info['processes'] == [
        {'npu': 0, 'chip': 0, 'pid': 1234, 'name': 'python3', 'memory_mb': 30000},
        {'npu': 0, 'chip': 1, 'pid': 5678, 'name': 'vllm', 'memory_mb': 28000},
    ]
    failures, warnings = evaluate_chips(info['chips'], 16, info['processes'])
    assert failures == []
    assert sorted(w['pid'] for w in warnings) == [1234, 5678]
    assert any('phy-id 0' in w['msg'] and '1234' in w['msg'] for w in warnings)

    failures, warnings = evaluate_chips(info['chips'], 16, info['processes'], own_pids=[5678])
    assert [w['pid'] for w in warnings] == [1234]

    failures, warnings = evaluate_chips(info['chips'], 16, info['processes'], own_pids=['5678'],
                                        hbm_in_use_policy='fail')
    assert [f['pid'] for f in failures] == [1234] and warnings == []

    assert evaluate_chips(info['chips'], 16, info['processes'], hbm_in_use_policy='ignore') == ([], [])


def test_hbm_used_without_process_over_limit(a3_idle):
    text = a3_idle.replace('3440 / 65536', '40000 / 65536')
    info = parse_npu_smi_info(text)
    assert info['chips'][0]['hbm_used_mb'] == 40000
    assert evaluate_chips(info['chips'], 16, [], hbm_used_limit_mb=None) == ([], [])
    failures, warnings = evaluate_chips(info['chips'], 16, [], hbm_used_limit_mb=8192)
    assert failures == [] and len(warnings) == 1
    assert warnings[0]['phy_id'] == 0 and '40000' in warnings[0]['msg']
    # our own process on that chip explains the usage
    own = [{'npu': 0, 'chip': 0, 'pid': 42, 'name': 'vllm', 'memory_mb': 36000}]
    assert evaluate_chips(info['chips'], 16, own, own_pids=[42], hbm_used_limit_mb=8192) == ([], [])


def test_bad_policy_is_rejected():
    with pytest.raises(ValueError):
        evaluate_chips([], None, [], hbm_in_use_policy='panic')


NPU_910B = '''
+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 97.8        36                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3374 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Warning       | NA          NA                0    / 0             |
| 0                         | 0000:C2:00.0  | NA          0    / 0          3370 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 0       0                 | 98765         | python                   | 61000                   |
+===========================+===============+====================================================+
| No running processes found in NPU 1                                                            |
+===========================+===============+====================================================+
'''


def test_910b_layout_without_phy_id_and_na_values():
    info = parse_npu_smi_info(NPU_910B)
    assert info['version'] == '23.0.rc3'
    assert [(c['npu'], c['chip'], c['phy_id']) for c in info['chips']] == [(0, 0, None), (1, 0, None)]
    assert info['chips'][1]['power_w'] is None and info['chips'][1]['temp_c'] is None
    assert info['chips'][1]['aicore_pct'] is None
    assert info['chips'][0]['hbm_used_mb'] == 3374
    assert info['processes'][0]['pid'] == 98765
    assert info['warnings'] == []
    failures, warnings = evaluate_chips(info['chips'], 2, info['processes'])
    assert 'NPU 1 chip 0 health is Warning' in ' '.join(f['msg'] for f in failures)
    assert chip_label(info['chips'][1]) == 'NPU 1 chip 0'
    assert [w['pid'] for w in warnings] == [98765]


NPU_310P_WIDE = '''
+--------------------------------------------------------------------------------------------------------+
| npu-smi 23.0.0                                   Version: 23.0.0                                       |
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
+===============================+=================+======================================================+
| 8       310P3                 | Alarm           | NA           50                0     / 0             |
| 0       0                     | 0000:81:00.0    | 0            1588 / 44280                            |
| 1       1                     | 0000:81:00.0    | 0            1343 / 43693                            |
+===============================+=================+======================================================+
'''


def test_other_widths_no_hbm_column_and_two_chips_per_row_group():
    info = parse_npu_smi_info(NPU_310P_WIDE)
    assert info['version'] == '23.0.0'
    assert len(info['chips']) == 2
    chip0, chip1 = info['chips']
    assert (chip0['npu'], chip0['chip'], chip0['phy_id'], chip1['chip']) == (8, 0, 0, 1)
    assert chip0['memory_used_mb'] == 1588 and chip0['memory_total_mb'] == 44280
    assert chip0['hbm_used_mb'] is None
    assert chip0['health'] == chip1['health'] == 'Alarm'
    failures, _unused = evaluate_chips(info['chips'], None, [])
    assert len(failures) == 2


def test_single_row_records_are_kept_with_a_warning():
    text = '''
| npu-smi 25.0.0                   Version: 25.0.0                                               |
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
+===========================+===============+====================================================+
| 0     Ascend910           | OK            | 100.0       40                0    / 0             |
+---------------------------+---------------+----------------------------------------------------+
| 1     Ascend910           | OK            | 101.0       41                0    / 0             |
+---------------------------+---------------+----------------------------------------------------+
'''
    info = parse_npu_smi_info(text)
    assert [c['npu'] for c in info['chips']] == [0, 1]
    assert all(c['chip'] is None and c['health'] == 'OK' for c in info['chips'])
    assert len(info['warnings']) == 2


@pytest.mark.parametrize('text', [
    '',
    '   \n\n',
    'dcmi module initialize failed. ret is -8005\n',
    'bash: npu-smi: command not found\n',
    '| just | a | table |\n',
])
def test_nothing_parseable_raises(text):
    with pytest.raises(NpuSmiParseError):
        parse_npu_smi_info(text)


def test_version_but_no_chips_is_not_an_error():
    info = parse_npu_smi_info('| npu-smi 24.1.rc3 Version: 24.1.rc3 |\n')
    assert info['version'] == '24.1.rc3' and info['chips'] == []
    assert info['warnings']
    failures, _unused = evaluate_chips(info['chips'], 16, [])
    assert failures and failures[0]['check'] == 'chip_count'


# --------------------------------------------------------------------------
# The npu_smi_info module: documentation and an end-to-end run as a script
# --------------------------------------------------------------------------

def test_module_docs_parse_and_match_argument_spec(module_spec, docs_match_spec):
    docs, spec, kwargs = module_spec('npu_smi_info')
    assert docs['DOCUMENTATION']['module'] == 'npu_smi_info'
    assert kwargs['supports_check_mode'] is True
    docs_match_spec(docs, spec)
    assert isinstance(docs['EXAMPLES'], list) and docs['EXAMPLES']
    assert 'npu_smi' in docs['RETURN']['ansible_facts']['contains']


def _npu_smi_script(fake_tool, text, rc=0, sleep=0):
    return fake_tool('npu-smi', 'time.sleep(%r)\nassert sys.argv[1:] == ["info"], sys.argv\n'
                                'sys.stdout.write(%r)\nsys.exit(%d)' % (sleep, text, rc))


def test_module_gathers_facts(run_module, fake_tool, a3_idle):
    tool = _npu_smi_script(fake_tool, a3_idle)
    result = run_module('npu_smi_info', {'npu_smi_path': tool, 'required_chips': 16}, check_mode=True)
    assert not result.get('failed'), result
    assert result['changed'] is False
    facts = result['ansible_facts']['npu_smi']
    assert len(facts['chips']) == 16 and facts['version'] == '24.1.rc3.7'
    assert result['healthy_chips'] == 16 and result['failures'] == []
    assert result['command'].endswith('npu-smi info')


def test_module_fails_on_alarm_and_keeps_the_data(run_module, fake_tool, a3_idle):
    tool = _npu_smi_script(fake_tool, set_health(a3_idle, npu=1, chip=1, health='Alarm'))
    result = run_module('npu_smi_info', {'npu_smi_path': tool, 'required_chips': 16})
    assert result['failed'] is True
    assert 'phy-id 3' in result['msg'] and 'Alarm' in result['msg']
    assert len(result['npu_smi']['chips']) == 16
    # without required_chips the same table is only a warning
    result = run_module('npu_smi_info', {'npu_smi_path': tool})
    assert not result.get('failed')
    assert any('phy-id 3' in w for w in result.get('warnings', []))


def test_module_hbm_in_use_fail(run_module, fake_tool, a3_idle):
    text = a3_idle.replace(
        '| No running processes found in NPU 2                                                            |',
        '| 2       1                 | 4321          | python3                  | 30000                   |')
    tool = _npu_smi_script(fake_tool, text)
    result = run_module('npu_smi_info', {'npu_smi_path': tool, 'required_chips': 16, 'hbm_in_use': 'fail'})
    assert result['failed'] is True and '4321' in result['msg'] and 'phy-id 5' in result['msg']
    result = run_module('npu_smi_info', {'npu_smi_path': tool, 'required_chips': 16, 'own_pids': [4321],
                                         'hbm_in_use': 'fail'})
    assert not result.get('failed'), result['msg']


def test_module_missing_binary(run_module, tmp_path):
    result = run_module('npu_smi_info', {'npu_smi_path': str(tmp_path / 'no-npu-smi')})
    assert result['failed'] is True
    assert 'npu-smi not found' in result['msg'] and 'npu_smi_path' in result['msg']


def test_module_unparseable_output(run_module, fake_tool):
    tool = _npu_smi_script(fake_tool, 'dcmi module initialize failed. ret is -8005\n', rc=255)
    result = run_module('npu_smi_info', {'npu_smi_path': tool})
    assert result['failed'] is True
    assert 'no chip table' in result['msg'] and '-8005' in result['msg'] and 'exit 255' in result['msg']


def test_module_timeout(run_module, fake_tool, a3_idle):
    tool = _npu_smi_script(fake_tool, a3_idle, sleep=10)
    result = run_module('npu_smi_info', {'npu_smi_path': tool, 'timeout': 1})
    assert result['failed'] is True and 'did not answer within 1s' in result['msg']


def test_row_with_one_usage_pair_under_a_two_column_header_is_memory(a3_idle):
    text = a3_idle.replace('| 0     0                   | 0000:9D:00.0  | 0           0    / 0          3440 / 65536         |',
                           '| 0     0                   | 0000:9D:00.0  | 0           1500 / 32768                       |')
    chip = parse_npu_smi_info(text)['chips'][0]
    assert (chip['memory_used_mb'], chip['memory_total_mb']) == (1500, 32768)
    assert chip['hbm_used_mb'] is None and chip['bus_id'] == '0000:9D:00.0'
