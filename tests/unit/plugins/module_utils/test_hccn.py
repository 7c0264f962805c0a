# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/module_utils/_hccn.py (no Ansible needed)."""

from __future__ import absolute_import, division, print_function

import subprocess
import threading
import time

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    CHECKS,
    NET_HEALTH_OK,
    NET_HEALTH_VALUES,
    ToolTimeout,
    build_argv,
    compare_tls,
    failure_message,
    normalize_peers,
    parse_hccs_ping,
    parse_ip,
    parse_link,
    parse_net_health,
    parse_tls,
    parse_tls_lines,
    parse_vnic,
    peer_map,
    resolve_devices,
    run_checks,
    subprocess_runner,
    summarize_warnings,
)


UNSUPPORTED = 'This device does not support this function.\n'
NO_IP = 'Get ipconf failed, because no ip was preset there!\n'
BUSY = 'The device is occupied. Please try again later.\n'


def ping_output(target, results, device=0):
    """hccs_ping output in the tool's format; results: list of True/False per packet."""
    out = ['device %d PING %s' % (device, target), '']
    for seq, ok in enumerate(results):
        out.append('This pkt ping success!' if ok else 'This pkt send fail!')
        out.append('recv seq %d, time = %s, L1 plane check result = 0x0' % (seq, '10.000us' if ok else '0.000us'))
        out.append('')
    sent, recv = len(results), sum(1 for r in results if r)
    loss = 0 if sent == recv else (sent - recv) * 100.0 / sent
    out.append('%d packets transmitted, %d received, %.2f%% packets loss' % (sent, recv, loss))
    out += ['max time 10.000us', 'min time 10.000us', 'average time 10.000us', 'TP95 time 10.000us']
    return '\n'.join(out) + '\n'


class FakeNode(object):
    """A runner that answers hccn_tool queries like a 16-device A3 node, with faults."""

    def __init__(self, node_index=0, vnic_down=(), no_vnic_ip=(), link_down=(), net_health=None,
                 tls=None, no_ip=(), ping_fail=None, ping_unsupported=False, timeouts=(),
                 missing=False, delay=0.0):
        self.node_index = node_index
        self.vnic_down = set(vnic_down)
        self.no_vnic_ip = set(no_vnic_ip)
        self.link_down = set(link_down)
        self.net_health = net_health or {}
        self.tls = tls or {}
        self.no_ip = set(no_ip)
        self.ping_fail = ping_fail or {}      # {(device, peer): [bools]}
        self.ping_unsupported = ping_unsupported
        self.timeouts = set(timeouts)         # {(device, check)}
        self.missing = missing
        self.delay = delay
        self.calls = []
        self.lock = threading.Lock()
        self.active = {}
        self.max_active_per_device = 0
        self.max_active = 0

    def vnic_ip(self, device):
        return '127.31.%d.%d' % (self.node_index, device + 1)

    def __call__(self, argv, timeout):
        if self.missing:
            raise FileNotFoundError(2, 'No such file or directory', argv[0])
        device = int(argv[2])
        check = argv[3].lstrip('-')
        with self.lock:
            self.calls.append(list(argv))
            self.active[device] = self.active.get(device, 0) + 1
            self.max_active_per_device = max(self.max_active_per_device, self.active[device])
            self.max_active = max(self.max_active, sum(self.active.values()))
        try:
            if self.delay:
                time.sleep(self.delay)
            if (device, check) in self.timeouts:
                raise ToolTimeout(argv, timeout)
            return self.answer(device, check, argv)
        finally:
            with self.lock:
                self.active[device] -= 1

    def answer(self, device, check, argv):
        if check == 'vnic':
            link = 'DOWN' if device in self.vnic_down else 'UP'
            ip = '' if device in self.no_vnic_ip else self.vnic_ip(device)
            return 0, 'vnic link status: %s\nvnic ipaddr: %s\nvnic netmask: 255.255.255.0\n' % (link, ip), ''
        if check == 'link':
            return 0, 'link status: %s\n' % ('DOWN' if device in self.link_down else 'UP'), ''
        if check == 'net_health':
            return 0, 'net health status: %s\n' % self.net_health.get(device, 'Success'), ''
        if check == 'tls':
            return 0, ('dev_id:%d, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, '
                       '1:preset), tls alarm time threshold[60]days\n' % (device, self.tls.get(device, 0))), ''
        if check == 'ip':
            if device in self.no_ip:
                return 13, '', NO_IP
            return 0, 'ipaddr:10.0.0.%d\nnetmask:255.255.255.0\n' % (device + 1), ''
        if check == 'hccs_ping':
            if self.ping_unsupported:
                return 1, '', UNSUPPORTED
            peer = argv[argv.index('address') + 1]
            count = int(argv[argv.index('cnt') + 1]) if 'cnt' in argv else 3
            results = self.ping_fail.get((device, peer), [True] * count)
            return 0, ping_output(peer, results, device), ''
        return 1, '', 'unknown command\n'


# --------------------------------------------------------------------------
# Parsers on the fixtures
# --------------------------------------------------------------------------

def test_vnic_fixture(fixture_text):
    rec = parse_vnic(fixture_text('hccn_vnic_up.txt'))
    assert rec['status'] == 'ok'
    assert (rec['link'], rec['ip'], rec['netmask']) == ('UP', '192.168.2.199', '255.255.255.0')


def test_link_fixtures(fixture_text):
    assert parse_link(fixture_text('hccn_link_up.txt'))['status'] == 'ok'
    down = parse_link(fixture_text('hccn_link_down.txt'))
    assert (down['status'], down['value']) == ('down', 'DOWN')


def test_net_health_fixtures(fixture_text):
    assert parse_net_health(fixture_text('hccn_net_health_success.txt'))['status'] == 'ok'
    init = parse_net_health(fixture_text('hccn_net_health_init.txt'))
    assert (init['status'], init['value']) == ('ok', 'Init')  # healthy HCCS-connected A3 chips read Init


def test_tls_fixture_two_devices(fixture_text):
    text = fixture_text('hccn_tls_grep_switch.txt')
    assert parse_tls_lines(text) == {0: 0, 1: 1}
    first = parse_tls(text.splitlines()[0])
    assert (first['status'], first['switch'], first['preconfigured'], first['alarm_days']) == ('ok', 0, 1, 60)
    assert parse_tls(text.splitlines()[1])['switch'] == 1


def test_ip_fixture(fixture_text):
    rec = parse_ip(fixture_text('hccn_ip_sample.txt'))
    assert (rec['status'], rec['ip'], rec['netmask']) == ('ok', '10.xx.xx.10', '255.255.255.0')


def test_hccs_ping_fixture(fixture_text):
    rec = parse_hccs_ping(fixture_text('hccn_hccs_ping_synthetic.txt'))
    assert rec['status'] == 'ok'
    assert rec['target'] == '192.168.2.200'
    assert (rec['success'], rec['transmitted'], rec['received'], rec['loss_pct']) == (3, 3, 3, 0.0)
    assert rec['times_us']['max'] == 12.345 and rec['times_us']['tp95'] == 12.345


# --------------------------------------------------------------------------
# Parser variations
# --------------------------------------------------------------------------

def test_vnic_down_and_no_ip_and_garbage():
    down = parse_vnic('vnic link status: DOWN\nvnic ipaddr: 192.168.2.1\nvnic netmask: 255.255.255.0\n')
    assert down['status'] == 'down'
    assert parse_vnic('vnic link status: UP\nvnic ipaddr: \nvnic netmask: \n')['status'] == 'no_ip'
    assert parse_vnic('vnic link status: UP\nvnic ipaddr: 0.0.0.0\n')['status'] == 'no_ip'
    bad = parse_vnic('', rc=255, stderr='dsmi get vnic failed\n')
    assert bad['status'] == 'error' and 'rc=255' in bad['error'] and 'dsmi get vnic failed' in bad['error']
    assert parse_vnic('\n\n  vnic link status:   UP  \n\n vnic ipaddr:  1.2.3.4\n')['status'] == 'ok'


def test_unsupported_and_busy_on_any_query():
    for parser in (parse_vnic, parse_link, parse_net_health, parse_tls, parse_hccs_ping):
        assert parser('', 1, UNSUPPORTED)['status'] == 'unsupported'
        assert parser(UNSUPPORTED, 1, '')['status'] == 'unsupported'
        assert parser('', 1, BUSY)['status'] == 'busy'


@pytest.mark.parametrize('value', ['Socket fail', 'Receive timeout', 'Unreachable', 'Time exceeded', 'Fault',
                                   'Thread error', 'Detect ip set', 'Unknown', 'Degraded', 'Successful', 'Init 2'])
def test_net_health_bad_states_are_unhealthy(value):
    # every state but Success and Init, the documented ones and ones never seen, is unhealthy
    rec = parse_net_health('net health status: %s\n' % value)
    assert (rec['status'], rec['value']) == ('unhealthy', value)


@pytest.mark.parametrize('text,value', [('net health status: Success\n', 'Success'),
                                        ('net health status: Init\n', 'Init'),
                                        ('  net health status :   SUCCESS  \n', 'SUCCESS'),
                                        ('\nnet health status: init\n\n', 'init')])
def test_net_health_success_and_init_are_healthy_in_any_case(text, value):
    rec = parse_net_health(text)
    assert (rec['status'], rec['value']) == ('ok', value)


def test_net_health_states_known_and_healthy_ones():
    assert NET_HEALTH_OK == ('Success', 'Init')
    assert set(NET_HEALTH_OK) < set(NET_HEALTH_VALUES)
    assert [v for v in NET_HEALTH_VALUES if parse_net_health('net health status: %s' % v)['status'] == 'ok'] == \
        ['Success', 'Init']


def test_net_health_without_a_state_line_is_an_error():
    rec = parse_net_health('', rc=255, stderr='dsmi get net health failed\n')
    assert rec['status'] == 'error' and rec['value'] is None
    assert "no 'net health status' line (rc=255: dsmi get net health failed)" == rec['error']
    assert parse_net_health('net health status:\n')['status'] == 'error'


def test_tls_device_prefix_variant_and_missing():
    rec = parse_tls('device 3, tls switch[1](0:disable, 1:enable), tls preconfigured[0](0:non-preset, 1:preset)\n'
                    '\t tls expiration status[0](0:normal, 1:near expiration, 2:has expired)\n')
    assert (rec['status'], rec['switch'], rec['preconfigured']) == ('ok', 1, 0)
    assert parse_tls_lines('device 3, tls switch[1](0:disable, 1:enable)\n') == {3: 1}
    missing = parse_tls('something else\n')
    assert missing['status'] == 'error' and 'tls switch' in missing['error']


def test_ip_unset_by_rc_13_or_message():
    assert parse_ip('', 13, NO_IP)['status'] == 'unset'
    assert parse_ip(NO_IP, 13, '')['status'] == 'unset'
    assert parse_ip('', 13, '')['status'] == 'unset'
    assert parse_ip('', 2, 'other failure\n')['status'] == 'error'


def test_hccs_ping_partial_loss_and_total_loss():
    partial = parse_hccs_ping(ping_output('127.31.1.1', [True, False, True]))
    assert partial['status'] == 'loss'
    assert (partial['success'], partial['failed_packets'], partial['received'], partial['transmitted']) == (2, 1, 2, 3)
    assert partial['loss_pct'] == 33.33
    total = parse_hccs_ping(ping_output('127.31.1.1', [False, False, False]))
    assert total['status'] == 'failed' and total['received'] == 0


def test_hccs_ping_without_summary():
    text = 'device 0 PING 1.2.3.4\n\nThis pkt ping success!\n\nThis pkt ping success!\n'
    assert parse_hccs_ping(text, expected=2)['status'] == 'ok'
    assert parse_hccs_ping(text, expected=3)['status'] == 'loss'
    assert parse_hccs_ping('device 0 PING 1.2.3.4\n', rc=0)['status'] == 'error'
    assert parse_hccs_ping('', rc=1, stderr='PING_ext failed. (ret=[5]; logic_id=[0])')['status'] == 'error'


def test_build_argv():
    assert build_argv('hccn_tool', 3, 'vnic') == ['hccn_tool', '-i', '3', '-vnic', '-g']
    assert build_argv('/x/hccn_tool', 0, 'hccs_ping', '10.0.0.1', 5) == [
        '/x/hccn_tool', '-i', '0', '-hccs_ping', '-g', 'address', '10.0.0.1', 'cnt', '5']


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def test_resolve_devices():
    assert resolve_devices(None, 4) == [0, 1, 2, 3]
    assert resolve_devices(['3', 1, 1], None) == [1, 3]
    for bad in ((None, None), (None, 0), (['x'], None), ([-1], None)):
        with pytest.raises(ValueError):
            resolve_devices(*bad)


def test_normalize_peers():
    assert normalize_peers(None, [0, 1]) == {}
    assert normalize_peers([], [0, 1]) == {}
    assert normalize_peers(['10.0.0.1', '10.0.0.2'], [0, 1]) == {
        0: ['10.0.0.1', '10.0.0.2'], 1: ['10.0.0.1', '10.0.0.2']}
    assert normalize_peers({'0': '10.0.0.1', 1: ['10.0.0.2', '10.0.0.2'], 9: ['10.0.0.9']}, [0, 1]) == {
        0: ['10.0.0.1'], 1: ['10.0.0.2']}
    with pytest.raises(ValueError, match='not an IP'):
        normalize_peers({'0': ['nope']}, [0])
    with pytest.raises(ValueError, match='not a device id'):
        normalize_peers({'zero': ['10.0.0.1']}, [0])


# --------------------------------------------------------------------------
# run_checks with a fake runner
# --------------------------------------------------------------------------

FAST = {'busy_delay': 0}


def test_healthy_node_without_peers():
    node = FakeNode()
    report = run_checks(range(16), node, {}, 3, FAST)
    assert report['failures'] == [] and report['warnings'] == []
    assert report['summary']['devices'] == 16
    assert report['summary']['commands'] == 16 * 5      # no peers: no ping
    assert report['summary']['peers'] == 0
    assert report['summary']['by_check']['vnic'] == {'ok': 16}
    assert report['tls'] == dict((d, 0) for d in range(16))
    assert report['vnic_ips'][5] == '127.31.0.6'
    dev0 = report['devices'][0]
    assert dev0['device'] == 0 and dev0['vnic']['command'] == 'hccn_tool -i 0 -vnic -g'
    assert dev0['hccs_ping'] == []


def test_failures_name_device_check_seen_and_command():
    peers = {d: ['127.31.1.%d' % (d + 1)] for d in range(16)}
    node = FakeNode(vnic_down=[5], no_vnic_ip=[6], link_down=[2], net_health={4: 'Init', 8: 'Fault'}, no_ip=[1],
                    ping_fail={(7, '127.31.1.8'): [True, False, True]})
    report = run_checks(range(16), node, peers, 3, dict(FAST, tool='/opt/hccn_tool'))
    fails = dict(((f['device'], f['check']), f) for f in report['failures'])
    assert sorted(fails) == [(5, 'vnic'), (6, 'vnic'), (7, 'hccs_ping'), (8, 'net_health')]
    assert dict(fails[(8, 'net_health')]) == {'device': 8, 'check': 'net_health', 'status': 'unhealthy',
                                              'seen': 'net health status: Fault',
                                              'command': '/opt/hccn_tool -i 8 -net_health -g'}
    assert fails[(5, 'vnic')]['seen'].startswith('vnic link status DOWN')
    assert fails[(5, 'vnic')]['command'] == '/opt/hccn_tool -i 5 -vnic -g'
    assert 'no usable ipaddr' in fails[(6, 'vnic')]['seen']
    ping = fails[(7, 'hccs_ping')]
    assert ping['peer'] == '127.31.1.8' and '2 of 3 packets received' in ping['seen']
    assert ping['command'] == '/opt/hccn_tool -i 7 -hccs_ping -g address 127.31.1.8 cnt 3'
    warns = sorted((w['device'], w['check'], w['status']) for w in report['warnings'])
    assert warns == [(1, 'ip', 'unset'), (2, 'link', 'down')]  # device 4 reads Init: healthy
    assert report['vnic_ips'][5] is None and report['vnic_ips'][6] is None
    assert report['summary']['failed_devices'] == [5, 6, 7, 8]
    assert report['summary']['ok_devices'] == 12
    assert report['summary']['by_check']['net_health'] == {'ok': 15, 'unhealthy': 1}
    assert report['summary']['by_check']['hccs_ping'] == {'ok': 15, 'loss': 1}

    msg = failure_message(report['failures'])
    for dev, cmd in ((5, '-vnic -g'), (6, '-vnic -g'), (7, '-hccs_ping -g address 127.31.1.8 cnt 3'),
                     (8, '-net_health -g')):
        assert 'device %d' % dev in msg and cmd in msg
    assert msg.startswith('4 NPU network check(s) failed')
    assert 'device 8 net_health: net health status: Fault [reproduce: /opt/hccn_tool -i 8 -net_health -g]' in msg
    assert 'What to do' in msg and 'net_health: only Success and Init are healthy' in msg
    assert 'set strict_net_health=false to make this advisory' in msg
    lines = summarize_warnings(report['warnings'])
    assert len(lines) == 2 and any('link down on device(s) 2' in l for l in lines)


def test_net_health_fails_by_default_and_strict_net_health_false_makes_it_advisory():
    node = FakeNode(link_down=[2], net_health={3: 'Init', 4: 'Fault', 5: 'Receive timeout'})
    default = run_checks(range(8), node, {}, 3, FAST)
    assert sorted((f['device'], f['check'], f['seen']) for f in default['failures']) == [
        (4, 'net_health', 'net health status: Fault'), (5, 'net_health', 'net health status: Receive timeout')]
    assert [(w['device'], w['check']) for w in default['warnings']] == [(2, 'link')]
    explicit = run_checks(range(8), node, {}, 3, dict(FAST, strict_net_health=True))
    assert explicit['failures'] == default['failures']
    advisory = run_checks(range(8), node, {}, 3, dict(FAST, strict_net_health=False))
    assert advisory['failures'] == []
    assert sorted((w['device'], w['check'], w['status']) for w in advisory['warnings']) == [
        (2, 'link', 'down'), (4, 'net_health', 'unhealthy'), (5, 'net_health', 'unhealthy')]


def test_strict_link_turns_the_link_warning_into_a_failure():
    node = FakeNode(link_down=[2], net_health={4: 'Init'})
    report = run_checks(range(8), node, {}, 3, dict(FAST, strict_link=True))
    assert sorted((f['device'], f['check']) for f in report['failures']) == [(2, 'link')]
    assert report['warnings'] == []


def test_net_health_unreadable_fails_but_unsupported_warns():
    def runner(argv, timeout):
        device = int(argv[2])
        if device == 0:
            return 255, '', 'dsmi get net health failed\n'
        return 1, '', UNSUPPORTED
    report = run_checks([0, 1], runner, {}, 3, dict(FAST, checks=['net_health']))
    assert [(f['device'], f['status']) for f in report['failures']] == [(0, 'error')]
    assert 'dsmi get net health failed' in report['failures'][0]['seen']
    assert [(w['device'], w['status']) for w in report['warnings']] == [(1, 'unsupported')]


def test_hccs_ping_unsupported_is_a_warning():
    node = FakeNode(ping_unsupported=True)
    report = run_checks([0, 1], node, {0: ['127.31.1.1'], 1: ['127.31.1.2']}, 3, FAST)
    assert report['failures'] == []
    assert [(w['device'], w['check'], w['status']) for w in report['warnings']] == [
        (0, 'hccs_ping', 'unsupported'), (1, 'hccs_ping', 'unsupported')]
    assert 'does not support' in report['warnings'][0]['seen']


def test_timeouts_via_fake_runner():
    node = FakeNode(timeouts=[(3, 'vnic'), (3, 'link'), (4, 'hccs_ping')])
    report = run_checks([3, 4], node, {4: ['127.31.1.5']}, 3, dict(FAST, timeout=7))
    fails = sorted((f['device'], f['check'], f['status']) for f in report['failures'])
    assert fails == [(3, 'vnic', 'timeout'), (4, 'hccs_ping', 'timeout')]
    assert 'no answer within 7s' in report['failures'][0]['seen']
    assert [(w['device'], w['check'], w['status']) for w in report['warnings']] == [(3, 'link', 'timeout')]


def test_subprocess_timeout_expired_is_handled_too():
    def runner(argv, timeout):
        raise subprocess.TimeoutExpired(argv, timeout)
    report = run_checks([0], runner, {}, 3, dict(FAST, checks=['vnic']))
    assert report['failures'][0]['status'] == 'timeout'


def test_missing_binary_via_runner():
    node = FakeNode(missing=True)
    report = run_checks([0, 1], node, {}, 3, dict(FAST, tool='/nope/hccn_tool'))
    # net_health cannot be read either: unhealthy, like a vNIC or TLS that cannot be read
    assert {f['check'] for f in report['failures']} == {'vnic', 'net_health', 'tls'}
    assert all(f['status'] == 'error' for f in report['failures'])
    assert 'cannot run /nope/hccn_tool' in report['failures'][0]['seen']


def test_tls_unreadable_fails():
    def runner(argv, timeout):
        if '-tls' in argv:
            return 0, 'tls query returned nothing useful\n', ''
        return FakeNode()(argv, timeout)
    report = run_checks([0], runner, {}, 3, dict(FAST, checks=['tls']))
    assert [(f['check'], f['status']) for f in report['failures']] == [('tls', 'error')]
    assert report['tls'] == {0: None}


def test_busy_is_retried():
    calls = []

    def runner(argv, timeout):
        calls.append(argv)
        if len(calls) == 1:
            return 1, '', BUSY
        return 0, ping_output('127.31.1.1', [True, True, True]), ''
    report = run_checks([0], runner, {0: ['127.31.1.1']}, 3, dict(FAST, checks=['hccs_ping']))
    assert report['failures'] == [] and len(calls) == 2
    assert report['devices'][0]['hccs_ping'][0]['attempts'] == 2

    calls[:] = []

    def always_busy(argv, timeout):
        calls.append(argv)
        return 1, '', BUSY
    report = run_checks([0], always_busy, {0: ['127.31.1.1']}, 3,
                        dict(FAST, checks=['hccs_ping'], busy_retries=1))
    assert len(calls) == 2
    assert report['failures'][0]['status'] == 'busy' and 'occupied' in report['failures'][0]['seen']


def test_checks_subset_and_unknown_check():
    node = FakeNode()
    report = run_checks([0], node, {0: ['127.31.1.1']}, 2, dict(FAST, checks=['hccs_ping']))
    assert [c[3] for c in node.calls] == ['-hccs_ping']
    assert 'cnt' in node.calls[0] and node.calls[0][-1] == '2'
    assert 'tls' not in report['devices'][0]
    with pytest.raises(ValueError, match='unknown check'):
        run_checks([0], node, {}, 3, {'checks': ['vnic', 'bogus']})


def test_devices_in_parallel_commands_of_a_device_in_sequence():
    peers = {d: ['127.31.1.1', '127.31.2.1'] for d in range(4)}
    node = FakeNode(delay=0.02)
    run_checks(range(4), node, peers, 3, dict(FAST, max_workers=4))
    assert node.max_active_per_device == 1
    assert node.max_active > 1
    serial = FakeNode(delay=0.005)
    run_checks(range(4), serial, peers, 3, dict(FAST, max_workers=1))
    assert serial.max_active == 1
    assert len(serial.calls) == 4 * (5 + 2)


def test_subprocess_runner_real_commands(tmp_path):
    rc, out, err = subprocess_runner(['sh', '-c', 'echo out; echo err >&2; exit 3'], 5)
    assert (rc, out, err) == (3, 'out\n', 'err\n')
    with pytest.raises(ToolTimeout):
        subprocess_runner(['sleep', '5'], 0.2)
    with pytest.raises(OSError):
        subprocess_runner([str(tmp_path / 'missing-tool')], 5)


# --------------------------------------------------------------------------
# Controller side
# --------------------------------------------------------------------------

def node_ips(index, devices=4, missing=()):
    return dict((d, None if d in missing else '127.31.%d.%d' % (index, d + 1)) for d in range(devices))


def test_peer_map_same_index():
    nodes = {'p0': node_ips(0), 'p1': node_ips(1), 'd0': node_ips(2, missing=[1]), 'd1': node_ips(3)}
    peers = peer_map(nodes, self_node='p0')
    assert peers[0] == ['127.31.1.1', '127.31.2.1', '127.31.3.1']
    assert peers[1] == ['127.31.1.2', '127.31.3.2']       # d0 device 1 has no IP
    assert sorted(peers) == [0, 1, 2, 3]
    assert all('127.31.0.' not in ip for ips in peers.values() for ip in ips)


def test_peer_map_all_pairs_and_string_keys():
    nodes = {'p0': {'0': '127.31.0.1', '1': '127.31.0.2'},
             'p1': {'0': '127.31.1.1', '1': '127.31.1.2'},
             'd0': {'0': '127.31.2.1', '1': None}}
    peers = peer_map(nodes, mode='all_pairs', self_node='p1')
    assert peers == {0: ['127.31.0.1', '127.31.0.2', '127.31.2.1'],
                     1: ['127.31.0.1', '127.31.0.2', '127.31.2.1']}
    with pytest.raises(ValueError):
        peer_map(nodes, mode='ring', self_node='p1')


def test_peer_map_from_hccn_check_results():
    reports = dict((name, run_checks(range(2), FakeNode(node_index=i), {}, 3, dict(FAST, checks=['vnic'])))
                   for i, name in enumerate(['p0', 'p1', 'd0']))
    # as the module returns them (string keys) ...
    registered = dict((n, {'vnic_ips': dict((str(k), v) for k, v in r['vnic_ips'].items())})
                      for n, r in reports.items())
    assert peer_map(registered, self_node='d0') == {0: ['127.31.0.1', '127.31.1.1'],
                                                    1: ['127.31.0.2', '127.31.1.2']}
    # ... or only with the devices list
    listed = dict((n, {'devices': r['devices']}) for n, r in reports.items())
    assert peer_map(listed, self_node='d0') == peer_map(registered, self_node='d0')


def test_compare_tls_consistent_and_not():
    same = {'p0': {0: 0, 1: 0}, 'p1': {0: 0, 1: 0}, 'd0': {'0': 0, '1': 0}}
    assert compare_tls(same) == []
    assert compare_tls(same, scope='device') == []

    one_off = {'p0': {0: 0, 1: 0}, 'p1': {0: 1, 1: 0}, 'd0': {0: 0, 1: 0}}
    failures = compare_tls(one_off, tool='/opt/hccn_tool')
    assert [(f['node'], f['device'], f['seen'], f['expected']) for f in failures] == [('p1', 0, 1, 0)]
    assert failures[0]['command'] == '/opt/hccn_tool -i 0 -tls -g | grep switch'
    assert 'node p1 device 0' in failures[0]['msg']
    assert compare_tls(one_off, scope='device')[0]['node'] == 'p1'
    # each node's own resolved tool path (the role passes every node's hccn_check result 'hccn_tool')
    per_node = compare_tls(one_off, tool={'p0': '/a/hccn_tool', 'p1': '/usr/local/Ascend/driver/tools/hccn_tool'})
    assert per_node[0]['command'] == '/usr/local/Ascend/driver/tools/hccn_tool -i 0 -tls -g | grep switch'
    assert compare_tls(one_off, tool={'p0': '/a/hccn_tool'})[0]['command'].startswith('hccn_tool -i 0 ')


def test_compare_tls_scope_difference_and_unreadable():
    # every node has device 0 disabled and device 1 enabled: consistent per device, mixed overall
    mixed = dict((n, {0: 0, 1: 1}) for n in ('p0', 'p1', 'd0', 'd1'))
    assert compare_tls(mixed, scope='device') == []
    failures = compare_tls(mixed, scope='all')
    assert len(failures) == 4 and all(f['seen'] == 1 and f['expected'] == 0 for f in failures)

    unreadable = {'p0': {0: 0}, 'p1': {0: None}}
    failures = compare_tls(unreadable)
    assert [(f['node'], f['seen']) for f in failures] == [('p1', None)]
    assert 'unreadable' in failures[0]['msg']
    with pytest.raises(ValueError):
        compare_tls(mixed, scope='node')


def test_compare_tls_from_fixture_and_results(fixture_text):
    pairs = parse_tls_lines(fixture_text('hccn_tls_grep_switch.txt'))
    assert len(compare_tls({'n1': pairs})) == 1      # dev 0 = 0, dev 1 = 1 on one node
    reports = {'p0': run_checks([0, 1], FakeNode(), {}, 3, dict(FAST, checks=['tls'])),
               'p1': run_checks([0, 1], FakeNode(tls={1: 1}), {}, 3, dict(FAST, checks=['tls']))}
    failures = compare_tls(reports)
    assert [(f['node'], f['device']) for f in failures] == [('p1', 1)]


def test_checks_constant():
    assert CHECKS == ('vnic', 'link', 'net_health', 'tls', 'ip', 'hccs_ping')


# --------------------------------------------------------------------------
# The hccn_check module: documentation and an end-to-end run as a script
# --------------------------------------------------------------------------

def test_module_docs_parse_and_match_argument_spec(module_spec, docs_match_spec):
    docs, spec, kwargs = module_spec('hccn_check')
    assert docs['DOCUMENTATION']['module'] == 'hccn_check'
    assert kwargs['supports_check_mode'] is True
    assert docs['DOCUMENTATION']['options']['checks']['default'] == list(CHECKS)
    docs_match_spec(docs, spec)
    assert isinstance(docs['EXAMPLES'], list) and docs['EXAMPLES']


FAKE_HCCN_TOOL = '''
import json, os
faults = json.loads(os.environ.get('FAKE_HCCN_FAULTS') or '{}')
args = sys.argv[1:]
dev = int(args[1]); cmd = args[2]
if cmd == '-vnic':
    state = 'DOWN' if dev in faults.get('vnic_down', []) else 'UP'
    print('vnic link status: %s' % state)
    print('vnic ipaddr: 127.31.0.%d' % (dev + 1))
    print('vnic netmask: 255.255.255.0')
elif cmd == '-link':
    print('link status: %s' % ('DOWN' if dev in faults.get('link_down', []) else 'UP'))
elif cmd == '-net_health':
    print('net health status: %s' % faults.get('net_health', {}).get(str(dev), 'Success'))
elif cmd == '-tls':
    print('dev_id:%d, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), '
          'tls alarm time threshold[60]days' % dev)
elif cmd == '-ip':
    sys.stderr.write('Get ipconf failed, because no ip was preset there!\\n'); sys.exit(13)
elif cmd == '-hccs_ping':
    if faults.get('unsupported'):
        print('This device does not support this function.'); sys.exit(1)
    peer = args[args.index('address') + 1]; n = int(args[args.index('cnt') + 1])
    ok = n - (1 if dev in faults.get('ping_loss', []) else 0)
    print('device %d PING %s' % (dev, peer))
    for i in range(n):
        print('This pkt ping success!' if i < ok else 'This pkt send fail!')
    print('%d packets transmitted, %d received, %.2f%% packets loss' % (n, ok, (n - ok) * 100.0 / n))
'''


def test_module_healthy_node_in_check_mode(run_module, fake_tool):
    tool = fake_tool('hccn_tool', FAKE_HCCN_TOOL)
    result = run_module('hccn_check', {'device_count': 4, 'hccn_tool_path': tool,
                                       'peers': {'0': ['127.31.1.1'], '1': '127.31.1.2'}}, check_mode=True)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False
    assert result['summary']['devices'] == 4 and result['summary']['peers'] == 2
    assert result['vnic_ips'] == {'0': '127.31.0.1', '1': '127.31.0.2', '2': '127.31.0.3', '3': '127.31.0.4'}
    assert result['tls'] == {'0': 0, '1': 0, '2': 0, '3': 0}
    assert [w['status'] for w in result['check_warnings']] == ['unset'] * 4
    assert any('ip unset on device(s) 0,1,2,3' in w for w in result['warnings'])
    assert result['hccn_tool'] == tool


def test_module_one_message_for_every_failing_device(run_module, fake_tool, monkeypatch):
    monkeypatch.setenv('FAKE_HCCN_FAULTS', '{"vnic_down": [1, 3], "ping_loss": [2]}')
    tool = fake_tool('hccn_tool', FAKE_HCCN_TOOL)
    result = run_module('hccn_check', {'devices': [0, 1, 2, 3], 'hccn_tool_path': tool,
                                       'peers': ['127.31.1.1'], 'ping_count': 4})
    assert result['failed'] is True
    msg = result['msg']
    assert msg.startswith('3 NPU network check(s) failed')
    assert 'device 1 vnic: vnic link status DOWN' in msg and 'device 3 vnic' in msg
    assert 'device 2 hccs_ping: to 127.31.1.1: 3 of 4 packets received' in msg
    assert '%s -i 2 -hccs_ping -g address 127.31.1.1 cnt 4' % tool in msg
    assert result['summary']['failed_devices'] == [1, 2, 3]


def test_module_unsupported_ping_and_strict_link(run_module, fake_tool, monkeypatch):
    monkeypatch.setenv('FAKE_HCCN_FAULTS', '{"unsupported": true, "link_down": [0]}')
    tool = fake_tool('hccn_tool', FAKE_HCCN_TOOL)
    args = {'devices': [0], 'hccn_tool_path': tool, 'peers': ['127.31.1.1']}
    result = run_module('hccn_check', args)
    assert not result.get('failed'), result.get('msg')
    assert sorted(w['check'] for w in result['check_warnings']) == ['hccs_ping', 'ip', 'link']
    result = run_module('hccn_check', dict(args, strict_link=True))
    assert result['failed'] is True and 'device 0 link: link status: DOWN' in result['msg']


def test_module_missing_binary_and_bad_arguments(run_module, tmp_path):
    result = run_module('hccn_check', {'device_count': 2, 'hccn_tool_path': str(tmp_path / 'no-hccn')})
    assert result['failed'] is True
    assert 'hccn_tool not found' in result['msg'] and 'hccn_tool_path' in result['msg']
    assert str(tmp_path / 'no-hccn') in result['msg']
    result = run_module('hccn_check', {'device_count': 2, 'peers': {'0': ['not-an-ip']}})
    assert result['failed'] is True and 'not an IP address' in result['msg']
    result = run_module('hccn_check', {'hccn_tool_path': str(tmp_path)})
    assert result['failed'] is True and 'devices' in result['msg'] and 'device_count' in result['msg']


def test_unexpected_runner_error_becomes_a_result():
    def runner(argv, timeout):
        raise RuntimeError('boom')
    report = run_checks([0], runner, {}, 3, dict(FAST, checks=['vnic', 'link']))
    assert [(f['check'], f['status']) for f in report['failures']] == [('vnic', 'error')]
    assert 'RuntimeError: boom' in report['failures'][0]['seen']
    assert report['warnings'][0]['check'] == 'link'


def test_module_fails_on_a_fault_chip_by_default_and_warns_when_not_strict(run_module, fake_tool, monkeypatch):
    monkeypatch.setenv('FAKE_HCCN_FAULTS', '{"net_health": {"1": "Init", "2": "Fault"}}')
    tool = fake_tool('hccn_tool', FAKE_HCCN_TOOL)
    args = {'devices': [0, 1, 2, 3], 'hccn_tool_path': tool, 'checks': ['vnic', 'net_health']}
    result = run_module('hccn_check', args)
    assert result['failed'] is True
    assert result['msg'].startswith('1 NPU network check(s) failed on this node: device 2 net_health: '
                                    'net health status: Fault [reproduce: %s -i 2 -net_health -g]' % tool)
    assert 'set strict_net_health=false' in result['msg']
    assert result['summary']['failed_devices'] == [2]
    assert result['summary']['by_check']['net_health'] == {'ok': 3, 'unhealthy': 1}
    result = run_module('hccn_check', dict(args, strict_net_health=False))
    assert not result.get('failed'), result.get('msg')
    assert [(w['device'], w['check'], w['seen']) for w in result['check_warnings']] == [
        (2, 'net_health', 'net health status: Fault')]
    assert any('net_health unhealthy on device(s) 2' in w for w in result['warnings'])


def test_module_default_for_strict_net_health_is_true(module_spec):
    docs, spec, _kwargs = module_spec('hccn_check')
    assert spec['strict_net_health'] == {'type': 'bool', 'default': True}
    assert docs['DOCUMENTATION']['options']['strict_net_health']['default'] is True
