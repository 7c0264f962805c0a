# -*- coding: utf-8 -*-
"""run_checks of plugins/module_utils/_hccn.py with a scripted runner: whole reports pinned.

What is pinned: every record a query leaves (status, values, error text, command), the severity and the 'seen'
sentence of each failure and warning, the summary, the tls/vnic_ips maps, the defaults of the options (tool,
checks, timeout, busy retries and delay, workers), and the one-line texts built from a report.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils import _hccn
from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    HINTS,
    ToolTimeout,
    failure_message,
    run_checks,
    summarize_warnings,
)

UNSUPPORTED = 'This device does not support this function.\n'
BUSY = 'The device is occupied. Please try again later.\n'
NO_IP = 'Get ipconf failed, because no ip was preset there!\n'
FAST = {'busy_delay': 0}


def tls_line(device, switch):
    return ('dev_id:%d, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), '
            'tls alarm time threshold[60]days\n' % (device, switch))


def summary_line(sent, received, loss):
    return '%d packets transmitted, %d received, %s%% packets loss\n' % (sent, received, loss)


class Script(object):
    """A runner answering from a table {(device, check or peer IP): (rc, out, err) or an exception}."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append((list(argv), timeout))
        device = int(argv[2])
        key = argv[argv.index('address') + 1] if 'address' in argv else argv[3].lstrip('-')
        answer = self.answers[(device, key)]
        if isinstance(answer, Exception):
            raise answer
        return answer


def strip_elapsed(devices):
    """The device records without the timing (elapsed_s is a measured duration)."""
    out = []
    for rec in devices:
        rec = dict(rec)
        for key, value in list(rec.items()):
            if key == 'hccs_ping':
                rec[key] = [dict((k, v) for k, v in r.items() if k != 'elapsed_s') for r in value]
            elif isinstance(value, dict):
                assert isinstance(value['elapsed_s'], float)
                rec[key] = dict((k, v) for k, v in value.items() if k != 'elapsed_s')
        out.append(rec)
    return out


MIXED = {
    (0, 'vnic'): (0, 'vnic link status: UP\nvnic ipaddr: 10.0.0.1\nvnic netmask: 255.255.255.0\n', ''),
    (0, 'link'): (0, 'link status: UP\n', ''),
    (0, 'net_health'): (0, 'net health status: Success\n', ''),
    (0, 'tls'): (0, tls_line(0, 0), ''),
    (0, 'ip'): (13, '', NO_IP),
    (0, '10.0.1.1'): (0, 'device 0 PING 10.0.1.1\n' + summary_line(2, 2, '0.00'), ''),
    (1, 'vnic'): (0, 'vnic link status: DOWN\nvnic ipaddr: 10.0.0.2\n', ''),
    (1, 'link'): (0, 'link status: DOWN\n', ''),
    (1, 'net_health'): (0, 'net health status: Init\n', ''),
    (1, 'tls'): (1, '', UNSUPPORTED),
    (1, 'ip'): (0, 'ipaddr:10.1.0.2\nnetmask:255.255.0.0\n', ''),
    (1, '10.0.1.2'): (0, 'device 1 PING 10.0.1.2\n' + summary_line(2, 1, '50.00'), ''),
    (1, '10.0.1.3'): (1, '', UNSUPPORTED),
}
PEERS = {0: ['10.0.1.1'], 1: ['10.0.1.2', '10.0.1.3'], 7: ['10.0.1.8']}
UNSUPPORTED_ERROR = 'This device does not support this function.'


def ping_rec(peer, text, rc=0, stderr='', **fields):
    out = {'status': 'ok', 'raw': text, 'rc': rc, 'stderr': stderr, 'error': None, 'target': peer, 'success': 0,
           'failed_packets': 0, 'transmitted': 2, 'received': 2, 'loss_pct': 0.0, 'times_us': {}, 'peer': peer}
    out.update(fields)
    return out


def test_a_mixed_node_whole_report():
    script = Script(MIXED)
    report = run_checks([0, 1], script, PEERS, 2, FAST)
    assert strip_elapsed(report['devices']) == [
        {'device': 0,
         'vnic': {'status': 'ok', 'raw': MIXED[(0, 'vnic')][1], 'rc': 0, 'stderr': '', 'error': None, 'link': 'UP',
                  'ip': '10.0.0.1', 'netmask': '255.255.255.0', 'command': 'hccn_tool -i 0 -vnic -g'},
         'link': {'status': 'ok', 'raw': 'link status: UP\n', 'rc': 0, 'stderr': '', 'error': None, 'value': 'UP',
                  'command': 'hccn_tool -i 0 -link -g'},
         'net_health': {'status': 'ok', 'raw': 'net health status: Success\n', 'rc': 0, 'stderr': '', 'error': None,
                        'value': 'Success', 'command': 'hccn_tool -i 0 -net_health -g'},
         'tls': {'status': 'ok', 'raw': tls_line(0, 0), 'rc': 0, 'stderr': '', 'error': None, 'switch': 0,
                 'preconfigured': 1, 'alarm_days': 60, 'command': 'hccn_tool -i 0 -tls -g'},
         'ip': {'status': 'unset', 'raw': '', 'rc': 13, 'stderr': NO_IP, 'error': None, 'ip': None, 'netmask': None,
                'command': 'hccn_tool -i 0 -ip -g'},
         'hccs_ping': [ping_rec('10.0.1.1', MIXED[(0, '10.0.1.1')][1],
                                command='hccn_tool -i 0 -hccs_ping -g address 10.0.1.1 cnt 2')]},
        {'device': 1,
         'vnic': {'status': 'down', 'raw': MIXED[(1, 'vnic')][1], 'rc': 0, 'stderr': '', 'error': None,
                  'link': 'DOWN', 'ip': '10.0.0.2', 'netmask': None, 'command': 'hccn_tool -i 1 -vnic -g'},
         'link': {'status': 'down', 'raw': 'link status: DOWN\n', 'rc': 0, 'stderr': '', 'error': None,
                  'value': 'DOWN', 'command': 'hccn_tool -i 1 -link -g'},
         'net_health': {'status': 'ok', 'raw': 'net health status: Init\n', 'rc': 0, 'stderr': '', 'error': None,
                        'value': 'Init', 'command': 'hccn_tool -i 1 -net_health -g'},
         'tls': {'status': 'unsupported', 'raw': '', 'rc': 1, 'stderr': UNSUPPORTED, 'error': UNSUPPORTED_ERROR,
                 'switch': None, 'preconfigured': None, 'alarm_days': None, 'command': 'hccn_tool -i 1 -tls -g'},
         'ip': {'status': 'ok', 'raw': 'ipaddr:10.1.0.2\nnetmask:255.255.0.0\n', 'rc': 0, 'stderr': '',
                'error': None, 'ip': '10.1.0.2', 'netmask': '255.255.0.0', 'command': 'hccn_tool -i 1 -ip -g'},
         'hccs_ping': [
             ping_rec('10.0.1.2', MIXED[(1, '10.0.1.2')][1], status='loss', received=1, loss_pct=50.0,
                      command='hccn_tool -i 1 -hccs_ping -g address 10.0.1.2 cnt 2'),
             ping_rec('10.0.1.3', '', rc=1, stderr=UNSUPPORTED, status='unsupported', error=UNSUPPORTED_ERROR,
                      target=None, transmitted=None, received=None, loss_pct=None,
                      command='hccn_tool -i 1 -hccs_ping -g address 10.0.1.3 cnt 2')]},
    ]
    assert report['failures'] == [
        {'device': 1, 'check': 'vnic', 'status': 'down', 'seen': 'vnic link status DOWN (ipaddr 10.0.0.2)',
         'command': 'hccn_tool -i 1 -vnic -g'},
        {'device': 1, 'check': 'hccs_ping', 'status': 'loss',
         'seen': 'to 10.0.1.2: 1 of 2 packets received (50.0% loss)',
         'command': 'hccn_tool -i 1 -hccs_ping -g address 10.0.1.2 cnt 2', 'peer': '10.0.1.2'},
    ]
    assert report['warnings'] == [
        {'device': 0, 'check': 'ip', 'status': 'unset', 'seen': 'no RoCE IP preset (rc 13)',
         'command': 'hccn_tool -i 0 -ip -g'},
        {'device': 1, 'check': 'link', 'status': 'down', 'seen': 'link status: DOWN',
         'command': 'hccn_tool -i 1 -link -g'},
        {'device': 1, 'check': 'tls', 'status': 'unsupported', 'seen': UNSUPPORTED_ERROR,
         'command': 'hccn_tool -i 1 -tls -g'},
        {'device': 1, 'check': 'hccs_ping', 'status': 'unsupported', 'seen': 'to 10.0.1.3: ' + UNSUPPORTED_ERROR,
         'command': 'hccn_tool -i 1 -hccs_ping -g address 10.0.1.3 cnt 2', 'peer': '10.0.1.3'},
    ]
    assert report['summary'] == {
        'devices': 2, 'commands': 13, 'failures': 2, 'warnings': 4, 'failed_devices': [1], 'ok_devices': 1,
        'by_check': {'vnic': {'ok': 1, 'down': 1}, 'link': {'ok': 1, 'down': 1}, 'net_health': {'ok': 2},
                     'tls': {'ok': 1, 'unsupported': 1}, 'ip': {'unset': 1, 'ok': 1},
                     'hccs_ping': {'ok': 1, 'loss': 1, 'unsupported': 1}},
        'peers': 3,
    }
    assert list(report['summary']) == ['devices', 'commands', 'failures', 'warnings', 'failed_devices', 'ok_devices',
                                       'by_check', 'peers']
    assert report['tls'] == {0: 0, 1: None}
    assert report['vnic_ips'] == {0: '10.0.0.1', 1: None}
    # the default timeout is 10 s per command; every command of the table ran once
    assert sorted(set(t for _argv, t in script.calls)) == [10]
    assert len(script.calls) == 13

    assert failure_message(report['failures']) == (
        '2 NPU network check(s) failed on this node: '
        'device 1 vnic: vnic link status DOWN (ipaddr 10.0.0.2) [reproduce: hccn_tool -i 1 -vnic -g]; '
        'device 1 hccs_ping: to 10.0.1.2: 1 of 2 packets received (50.0% loss) '
        '[reproduce: hccn_tool -i 1 -hccs_ping -g address 10.0.1.2 cnt 2]. '
        'What to do: vnic: bring the vNIC up and give it an IP (check /etc/hccn.conf and the driver on that device); '
        'hccs_ping: check the HCCS/super-pod fabric between the nodes and the peer vNIC IP '
        '(run the command by hand on this node)')
    assert summarize_warnings(report['warnings']) == [
        'ip unset on device(s) 0 (advisory; e.g. hccn_tool -i 0 -ip -g -> no RoCE IP preset (rc 13))',
        'link down on device(s) 1 (advisory; e.g. hccn_tool -i 1 -link -g -> link status: DOWN)',
        'tls unsupported on device(s) 1 (advisory; e.g. hccn_tool -i 1 -tls -g -> %s)' % UNSUPPORTED_ERROR,
        'hccs_ping unsupported on device(s) 1 (advisory; e.g. hccn_tool -i 1 -hccs_ping -g address 10.0.1.3 cnt 2 '
        '-> to 10.0.1.3: %s)' % UNSUPPORTED_ERROR,
    ]


def test_the_checks_of_a_device_run_in_the_order_of_checks():
    script = Script(MIXED)
    run_checks([1], script, {1: ['10.0.1.3', '10.0.1.2']}, None, FAST)
    assert [argv for argv, _t in script.calls] == [
        ['hccn_tool', '-i', '1', '-vnic', '-g'], ['hccn_tool', '-i', '1', '-link', '-g'],
        ['hccn_tool', '-i', '1', '-net_health', '-g'], ['hccn_tool', '-i', '1', '-tls', '-g'],
        ['hccn_tool', '-i', '1', '-ip', '-g'],
        ['hccn_tool', '-i', '1', '-hccs_ping', '-g', 'address', '10.0.1.3'],
        ['hccn_tool', '-i', '1', '-hccs_ping', '-g', 'address', '10.0.1.2']]


def test_options_tool_timeout_and_checks():
    script = Script(MIXED)
    report = run_checks([0], script, None, 2, dict(FAST, tool='/opt/t', timeout=3, checks=['tls', 'vnic']))
    assert list(script.calls) == [(['/opt/t', '-i', '0', '-vnic', '-g'], 3),
                                  (['/opt/t', '-i', '0', '-tls', '-g'], 3)]
    assert list(report['devices'][0]) == ['device', 'vnic', 'tls']
    assert report['summary']['by_check'] == {'tls': {'ok': 1}, 'vnic': {'ok': 1}}
    assert report['summary']['peers'] == 0
    with pytest.raises(ValueError) as err:
        run_checks([0], script, {}, 3, {'checks': ['vnic', 'bogus', 'ping']})
    assert str(err.value) == ('unknown check(s) bogus, ping; known: vnic, link, net_health, tls, ip, hccs_ping')


def test_no_vnic_check_no_vnic_ips_and_no_tls_check_no_tls_map():
    report = run_checks([0], Script(MIXED), {}, 2, dict(FAST, checks=['link']))
    assert (report['tls'], report['vnic_ips']) == ({}, {})
    assert strip_elapsed(report['devices'])[0] == {
        'device': 0, 'link': {'status': 'ok', 'raw': 'link status: UP\n', 'rc': 0, 'stderr': '', 'error': None,
                              'value': 'UP', 'command': 'hccn_tool -i 0 -link -g'}}


# --------------------------------------------------------------------------
# Severity and the 'seen' sentence of every kind of result
# --------------------------------------------------------------------------

@pytest.mark.parametrize('check,answer,options,severity,status,seen', [
    ('vnic', (0, 'vnic link status: UP\nvnic ipaddr: 0.0.0.0\n', ''), {}, 'fail', 'no_ip',
     "vnic link status UP but no usable ipaddr ('0.0.0.0')"),
    ('vnic', (0, 'vnic link status: UP\n', ''), {}, 'fail', 'no_ip', 'vnic link status UP but no usable ipaddr (None)'),
    ('vnic', (1, '', UNSUPPORTED), {}, 'fail', 'unsupported', UNSUPPORTED_ERROR),
    ('vnic', (1, '', BUSY), {'busy_retries': 0}, 'fail', 'busy',
     'The device is occupied (another hccn_tool command is running on it)'),
    ('link', (0, 'link status: DOWN\n', ''), {'strict_link': True}, 'fail', 'down', 'link status: DOWN'),
    ('link', (0, 'link status: DOWN\n', ''), {'strict_link': False}, 'warn', 'down', 'link status: DOWN'),
    ('link', (7, '', 'oops\n'), {}, 'warn', 'error', "no 'link status' line (rc=7: oops)"),
    ('net_health', (0, 'net health status: Fault\n', ''), {}, 'fail', 'unhealthy', 'net health status: Fault'),
    ('net_health', (0, 'net health status: Fault\n', ''), {'strict_net_health': False}, 'warn', 'unhealthy',
     'net health status: Fault'),
    ('net_health', (1, '', UNSUPPORTED), {'strict_net_health': True}, 'warn', 'unsupported', UNSUPPORTED_ERROR),
    ('net_health', (1, '', BUSY), {'busy_retries': 0, 'strict_net_health': False}, 'warn', 'busy',
     'The device is occupied (another hccn_tool command is running on it)'),
    ('tls', (0, 'garbage\n', ''), {}, 'fail', 'error', "no 'tls switch[N]' in the output (rc=0: garbage)"),
    ('tls', (1, '', BUSY), {'busy_retries': 0}, 'fail', 'busy',
     'The device is occupied (another hccn_tool command is running on it)'),
    ('ip', (3, '', 'bad\n'), {}, 'warn', 'error', "no 'ipaddr:' line (rc=3: bad)"),
    ('ip', (1, '', UNSUPPORTED), {'strict_link': True}, 'warn', 'unsupported', UNSUPPORTED_ERROR),
])
def test_judgement_of_one_result(check, answer, options, severity, status, seen):
    report = run_checks([4], Script({(4, check): answer}), {}, 3, dict(FAST, checks=[check], **options))
    entry = {'device': 4, 'check': check, 'status': status, 'seen': seen,
             'command': 'hccn_tool -i 4 -%s -g' % check}
    assert (report['failures'], report['warnings']) == (([entry], []) if severity == 'fail' else ([], [entry]))
    assert report['summary']['failed_devices'] == ([4] if severity == 'fail' else [])
    assert report['summary']['ok_devices'] == (0 if severity == 'fail' else 1)


@pytest.mark.parametrize('answer,severity,status,seen', [
    ((0, 'PING 10.0.9.9\n' + summary_line(3, 0, '100.00'), ''), 'fail', 'failed',
     'to 10.0.9.9: 0 of 3 packets received (100.0% loss)'),
    ((0, '', ''), 'fail', 'error', 'to 10.0.9.9: no ping summary line (rc=0, no output)'),
    ((1, '', BUSY), 'fail', 'busy', 'to 10.0.9.9: The device is occupied (another hccn_tool command is running on it)'),
    (ToolTimeout(['x'], 4), 'fail', 'timeout', 'to 10.0.9.9: no answer within 4s'),
])
def test_judgement_of_a_ping(answer, severity, status, seen):
    report = run_checks([2], Script({(2, '10.0.9.9'): answer}), {2: ['10.0.9.9']}, 3,
                        dict(FAST, checks=['hccs_ping'], busy_retries=0, timeout=4))
    assert report['failures'] == [{'device': 2, 'check': 'hccs_ping', 'status': status, 'seen': seen,
                                   'command': 'hccn_tool -i 2 -hccs_ping -g address 10.0.9.9 cnt 3',
                                   'peer': '10.0.9.9'}]


# --------------------------------------------------------------------------
# Runner errors become results
# --------------------------------------------------------------------------

def test_runner_errors_become_records():
    import subprocess
    script = Script({
        (0, 'vnic'): ToolTimeout(['hccn_tool'], 6),
        (0, 'link'): subprocess.TimeoutExpired(['hccn_tool'], 6),
        (0, 'net_health'): FileNotFoundError(2, 'No such file or directory', 'hccn_tool'),
        (0, 'tls'): RuntimeError('boom'),
        (0, 'ip'): (0, 123, ''),
    })
    report = run_checks([0], script, {}, 3, dict(FAST, timeout=6))
    records = strip_elapsed(report['devices'])[0]
    assert records['vnic'] == {'status': 'timeout', 'raw': '', 'rc': None, 'stderr': '', 'timeout': 6,
                               'error': 'no answer within 6s', 'command': 'hccn_tool -i 0 -vnic -g'}
    assert records['link'] == {'status': 'timeout', 'raw': '', 'rc': None, 'stderr': '', 'timeout': 6,
                               'error': 'no answer within 6s', 'command': 'hccn_tool -i 0 -link -g'}
    assert records['net_health'] == {
        'status': 'error', 'raw': '', 'rc': None, 'stderr': '',
        'error': "cannot run hccn_tool: [Errno 2] No such file or directory: 'hccn_tool'",
        'command': 'hccn_tool -i 0 -net_health -g'}
    assert records['tls'] == {'status': 'error', 'raw': '', 'rc': None, 'stderr': '',
                              'error': 'unexpected error running the command: RuntimeError: boom',
                              'command': 'hccn_tool -i 0 -tls -g'}
    ip = dict(records['ip'])
    error = ip.pop('error')
    assert ip == {'status': 'error', 'raw': 123, 'rc': 0, 'stderr': '', 'command': 'hccn_tool -i 0 -ip -g'}
    assert error.startswith('could not read the output: TypeError: ')
    assert [(f['check'], f['seen']) for f in report['failures']] == [
        ('vnic', 'no answer within 6s'), ('net_health', "cannot run hccn_tool: [Errno 2] No such file or directory: "
                                          "'hccn_tool'"),
        ('tls', 'unexpected error running the command: RuntimeError: boom')]
    assert [(w['check'], w['status']) for w in report['warnings']] == [('link', 'timeout'), ('ip', 'error')]


def test_a_ping_gets_its_count_as_the_expected_packets():
    text = 'PING 10.0.9.9\nThis pkt ping success!\nThis pkt ping success!\n'
    script = Script({(0, '10.0.9.9'): (0, text, '')})
    assert run_checks([0], script, {0: ['10.0.9.9']}, 3, dict(FAST, checks=['hccs_ping']))['failures'][0]['seen'] \
        == 'to 10.0.9.9: 2 of 2 packets received (None% loss)'
    assert run_checks([0], script, {0: ['10.0.9.9']}, 2, dict(FAST, checks=['hccs_ping']))['failures'] == []


# --------------------------------------------------------------------------
# Busy: retried busy_retries times (default 2), busy_delay apart (default 1 s)
# --------------------------------------------------------------------------

def test_busy_retries_and_delay_defaults(monkeypatch):
    sleeps = []
    monkeypatch.setattr(_hccn.time, 'sleep', sleeps.append)
    script = Script({(0, 'vnic'): (1, '', BUSY)})
    report = run_checks([0], script, {}, 3, {'checks': ['vnic']})
    assert len(script.calls) == 3 and sleeps == [1.0, 1.0]
    rec = report['devices'][0]['vnic']
    assert (rec['status'], rec['attempts']) == ('busy', 3)

    sleeps[:] = []
    script = Script({(0, 'vnic'): (1, '', BUSY)})
    report = run_checks([0], script, {}, 3, {'checks': ['vnic'], 'busy_retries': 1, 'busy_delay': '0.25'})
    assert len(script.calls) == 2 and sleeps == [0.25]
    assert report['devices'][0]['vnic']['attempts'] == 2

    sleeps[:] = []
    script = Script({(0, 'vnic'): (1, '', BUSY)})
    report = run_checks([0], script, {}, 3, {'checks': ['vnic'], 'busy_retries': 0})
    assert len(script.calls) == 1 and sleeps == []
    assert 'attempts' not in report['devices'][0]['vnic']


def test_busy_then_ok_counts_the_attempts(monkeypatch):
    monkeypatch.setattr(_hccn.time, 'sleep', lambda s: None)
    answers = [(1, '', BUSY), (0, 'link status: UP\n', '')]

    def runner(argv, timeout):
        return answers.pop(0)
    report = run_checks([0], runner, {}, 3, {'checks': ['link']})
    rec = report['devices'][0]['link']
    assert (rec['status'], rec['attempts'], rec['value']) == ('ok', 2, 'UP')
    assert answers == []


# --------------------------------------------------------------------------
# Workers: 16 devices at most at once by default, each device's commands one after another
# --------------------------------------------------------------------------

class Concurrency(object):
    def __init__(self, delay):
        self.delay = delay
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def __call__(self, argv, timeout):
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.delay)
        finally:
            with self.lock:
                self.active -= 1
        return 0, 'link status: UP\n', ''


def test_default_worker_count_is_16():
    runner = Concurrency(0.3)
    report = run_checks(range(20), runner, {}, 3, {'checks': ['link']})
    assert runner.peak == 16
    assert report['summary']['by_check'] == {'link': {'ok': 20}}


def test_max_workers_option_and_its_floor():
    runner = Concurrency(0.2)
    run_checks(range(4), runner, {}, 3, {'checks': ['link'], 'max_workers': 3})
    assert runner.peak == 3
    runner = Concurrency(0.05)
    run_checks(range(3), runner, {}, 3, {'checks': ['link'], 'max_workers': -5})
    assert runner.peak == 1


# --------------------------------------------------------------------------
# Texts built from a report
# --------------------------------------------------------------------------

def entry(device, check, seen, command, status='down'):
    return {'device': device, 'check': check, 'status': status, 'seen': seen, 'command': command}


def test_failure_message_whole_text_with_and_without_hints():
    failures = [entry(3, 'link', 'link status: DOWN', 'hccn_tool -i 3 -link -g'),
                entry(1, 'tls', 'tls switch 1', 'hccn_tool -i 1 -tls -g | grep switch'),
                entry(2, 'link', 'link status: DOWN', 'hccn_tool -i 2 -link -g'),
                entry(2, 'custom', 'something', 'cmd')]
    assert failure_message(failures, hints=False) == (
        '4 NPU network check(s) failed on this node: '
        'device 3 link: link status: DOWN [reproduce: hccn_tool -i 3 -link -g]; '
        'device 1 tls: tls switch 1 [reproduce: hccn_tool -i 1 -tls -g | grep switch]; '
        'device 2 link: link status: DOWN [reproduce: hccn_tool -i 2 -link -g]; '
        'device 2 custom: something [reproduce: cmd]')
    # each check's hint once, in the order the checks first fail; a check without a hint adds none
    assert failure_message(failures) == failure_message(failures, hints=False) + (
        '. What to do: link: link can read DOWN on healthy HCCS-connected A3 machines; set strict_link=false '
        'to make this advisory; tls: the TLS switch must be identical on every device of every node '
        '(hccn_tool -i N -tls -s enable 0|1)')
    assert failure_message([]) == ''
    assert failure_message(None) == ''


def test_hints_of_every_check():
    assert HINTS == {
        'vnic': 'bring the vNIC up and give it an IP (check /etc/hccn.conf and the driver on that device)',
        'hccs_ping': 'check the HCCS/super-pod fabric between the nodes and the peer vNIC IP '
                     '(run the command by hand on this node)',
        'tls': 'the TLS switch must be identical on every device of every node (hccn_tool -i N -tls -s enable 0|1)',
        'link': 'link can read DOWN on healthy HCCS-connected A3 machines; set strict_link=false to make this '
                'advisory',
        'net_health': 'only Success and Init are healthy; check the RoCE port of the chip and its detect IP '
                      '(hccn_tool -i N -netdetect -g, /etc/hccn.conf), or set strict_net_health=false to make '
                      'this advisory',
        'ip': 'no RoCE IP is preset on this device (advisory)',
    }


def test_summarize_warnings_groups_by_check_and_status():
    warnings = [entry(5, 'link', 'link status: DOWN', 'hccn_tool -i 5 -link -g'),
                entry(1, 'ip', 'no RoCE IP preset (rc 13)', 'hccn_tool -i 1 -ip -g', status='unset'),
                entry(3, 'link', 'link status: DOWN', 'hccn_tool -i 3 -link -g'),
                entry(5, 'link', 'link status: DOWN', 'hccn_tool -i 5 -link -g'),
                entry(12, 'link', 'link status: error', 'hccn_tool -i 12 -link -g', status='error')]
    assert summarize_warnings(warnings) == [
        'link down on device(s) 3,5 (advisory; e.g. hccn_tool -i 5 -link -g -> link status: DOWN)',
        'ip unset on device(s) 1 (advisory; e.g. hccn_tool -i 1 -ip -g -> no RoCE IP preset (rc 13))',
        'link error on device(s) 12 (advisory; e.g. hccn_tool -i 12 -link -g -> link status: error)',
    ]
    assert summarize_warnings([]) == []


# --------------------------------------------------------------------------
# subprocess_runner: the C locale, no stdin, undecodable bytes replaced
# --------------------------------------------------------------------------

def test_subprocess_runner_environment_and_decoding(monkeypatch):
    monkeypatch.setenv('LANG', 'zh_CN.UTF-8')
    monkeypatch.setenv('LC_ALL', 'zh_CN.UTF-8')
    monkeypatch.setenv('A3_HCCN_PROBE', 'kept')
    rc, out, err = _hccn.subprocess_runner(
        ['sh', '-c', 'echo "$LANG $LC_ALL $A3_HCCN_PROBE"; printf "\\376." ; printf "a\\377b" >&2; exit 4'], 5)
    assert (rc, out, err) == (4, 'C C kept\n\ufffd.', 'a\ufffdb')
    # stdin is /dev/null, not ours: a tool waiting for input reads end-of-file at once, even when our own
    # stdin is a pipe that stays open
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert _hccn.subprocess_runner(['sh', '-c', 'cat; echo done'], 3) == (0, 'done\n', '')
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert _hccn.subprocess_runner(['echo', 3, 'x'], 5) == (0, '3 x\n', '')


def test_subprocess_runner_timeout_names_the_command():
    with pytest.raises(ToolTimeout) as err:
        _hccn.subprocess_runner(['sleep', 3], 0.2)
    assert str(err.value) == 'sleep 3: no answer within 0.2s'
    assert (err.value.argv, err.value.timeout) == (['sleep', 3], 0.2)


# --------------------------------------------------------------------------
# elapsed_s: the measured duration of each command, in seconds rounded to the millisecond
# --------------------------------------------------------------------------

class Clock(object):
    """Stands in for the time module of _hccn: each reading is 0.1234567 s after the one before."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def time(self):
        self.now += 0.1234567
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)


def test_elapsed_seconds_of_every_kind_of_record(monkeypatch):
    import subprocess
    clock = Clock()
    monkeypatch.setattr(_hccn, 'time', clock)
    script = Script({
        (0, 'vnic'): ToolTimeout(['hccn_tool'], 6),
        (0, 'link'): subprocess.TimeoutExpired(['hccn_tool'], 6),
        (0, 'net_health'): FileNotFoundError(2, 'No such file or directory', 'hccn_tool'),
        (0, 'tls'): RuntimeError('boom'),
        (0, 'ip'): (0, 123, ''),
        (0, '10.0.9.9'): (1, '', BUSY),
    })
    report = run_checks([0], script, {0: ['10.0.9.9']}, 3, {'timeout': 6, 'busy_retries': 1})
    device = report['devices'][0]
    assert [device[c]['elapsed_s'] for c in ('vnic', 'link', 'net_health', 'tls', 'ip')] == [0.123] * 5
    assert device['hccs_ping'][0]['elapsed_s'] == 0.123
    assert clock.slept == [1.0]


def test_default_ping_count_is_3():
    script = Script({(0, '10.0.9.9'): (0, 'PING 10.0.9.9\n' + summary_line(3, 3, '0.00'), '')})
    run_checks([0], script, {0: ['10.0.9.9']}, options=dict(FAST, checks=['hccs_ping']))
    assert [argv for argv, _t in script.calls] == [
        ['hccn_tool', '-i', '0', '-hccs_ping', '-g', 'address', '10.0.9.9', 'cnt', '3']]
