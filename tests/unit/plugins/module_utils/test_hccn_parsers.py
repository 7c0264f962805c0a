# -*- coding: utf-8 -*-
"""Whole-result pins of the hccn_tool parsers of plugins/module_utils/_hccn.py.

Each case gives the tool's output (the fixtures under tests/fixtures are real samples) and the complete dict
the parser returns: status, the values read, the error text and the raw/rc/stderr passthrough.
"""

from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    build_argv,
    parse_hccs_ping,
    parse_ip,
    parse_link,
    parse_net_health,
    parse_tls,
    parse_tls_lines,
    parse_vnic,
    quote_argv,
    ToolTimeout,
)

UNSUPPORTED = 'This device does not support this function.\n'
BUSY = 'The device is occupied. Please try again later.\n'
NO_IP = 'Get ipconf failed, because no ip was preset there!\n'
UNSUPPORTED_ERROR = 'This device does not support this function.'
BUSY_ERROR = 'The device is occupied (another hccn_tool command is running on it)'


def base(raw='', rc=0, stderr='', status='ok', error=None, **fields):
    out = {'status': status, 'raw': raw, 'rc': rc, 'stderr': stderr, 'error': error}
    out.update(fields)
    return out


# --------------------------------------------------------------------------
# -vnic -g
# --------------------------------------------------------------------------

def vnic(**kw):
    fields = {'link': None, 'ip': None, 'netmask': None}
    fields.update(kw.pop('fields', {}))
    return base(**dict(kw, **fields))


def test_vnic_fixture_whole_result(fixture_text):
    text = fixture_text('hccn_vnic_up.txt')
    assert parse_vnic(text) == vnic(raw=text, fields={'link': 'UP', 'ip': '192.168.2.199',
                                                      'netmask': '255.255.255.0'})


@pytest.mark.parametrize('text,rc,stderr,expected', [
    # lower-case state and indented lines are read; the state is upper-cased
    ('  vnic link status :  up\n  vnic ipaddr : 10.1.2.3\n  vnic netmask : 255.255.0.0\n', 0, '',
     vnic(status='ok', fields={'link': 'UP', 'ip': '10.1.2.3', 'netmask': '255.255.0.0'})),
    ('VNIC LINK STATUS: DOWN\nVNIC IPADDR: 10.1.2.3\n', 0, '',
     vnic(status='down', fields={'link': 'DOWN', 'ip': '10.1.2.3'})),
    # an empty ipaddr/netmask is no IP
    ('vnic link status: UP\nvnic ipaddr: \nvnic netmask: \n', 0, '',
     vnic(status='no_ip', fields={'link': 'UP'})),
    ('vnic link status: UP\nvnic netmask: 255.255.255.0\n', 0, '',
     vnic(status='no_ip', fields={'link': 'UP', 'netmask': '255.255.255.0'})),
    # an unspecified or unreadable address is no usable IP
    ('vnic link status: UP\nvnic ipaddr: 0.0.0.0\n', 0, '',
     vnic(status='no_ip', fields={'link': 'UP', 'ip': '0.0.0.0'})),
    ('vnic link status: UP\nvnic ipaddr: 300.1.1.1\n', 0, '',
     vnic(status='no_ip', fields={'link': 'UP', 'ip': '300.1.1.1'})),
    ('vnic link status: UP\nvnic ipaddr: ::1\n', 0, '',
     vnic(status='ok', fields={'link': 'UP', 'ip': '::1'})),
    # a line must start with the key
    ('the vnic link status: UP\nvnic ipaddr: 10.0.0.1\n', 3, '',
     vnic(status='error', error="no 'vnic link status' line (rc=3: vnic ipaddr: 10.0.0.1)",
          fields={'ip': '10.0.0.1'})),
    # no state line: the last line of stderr (else stdout) names the problem, cut at 200 characters
    ('', 255, 'first\ndsmi get vnic failed\n', vnic(status='error', rc=255, stderr='first\ndsmi get vnic failed\n',
                                                    error="no 'vnic link status' line (rc=255: dsmi get vnic failed)")),
    ('', 1, '  ' + 'x' * 250 + '  \n',
     vnic(status='error', rc=1, stderr='  ' + 'x' * 250 + '  \n',
          error="no 'vnic link status' line (rc=1: %s)" % ('x' * 200))),
    (None, 2, None, vnic(status='error', rc=2, error="no 'vnic link status' line (rc=2, no output)")),
    ('', 1, UNSUPPORTED, vnic(status='unsupported', rc=1, stderr=UNSUPPORTED, error=UNSUPPORTED_ERROR)),
    ('', 1, BUSY, vnic(status='busy', rc=1, stderr=BUSY, error=BUSY_ERROR)),
])
def test_vnic_variants(text, rc, stderr, expected):
    expected = dict(expected, raw=text or '', rc=rc, stderr=stderr or '')
    assert parse_vnic(text, rc, stderr) == expected


def test_an_empty_value_is_not_read_from_the_next_line():
    # the value after the colon stays on its line (an empty 'vnic ipaddr:' is no IP, not the word 'vnic')
    text = 'vnic link status: UP\nvnic ipaddr:\nvnic netmask:\n'
    assert parse_vnic(text) == vnic(raw=text, status='no_ip', fields={'link': 'UP'})
    text = 'vnic link status:\nvnic ipaddr: 10.0.0.1\n'
    assert parse_vnic(text) == vnic(raw=text, status='error', fields={'ip': '10.0.0.1'},
                                    error="no 'vnic link status' line (rc=0: vnic ipaddr: 10.0.0.1)")
    text = 'link status:\nUP\n'
    assert parse_link(text) == base(raw=text, status='error', value=None, error="no 'link status' line (rc=0: UP)")
    text = 'net health status:  \nSuccess\n'
    assert parse_net_health(text) == base(raw=text, status='error', value=None,
                                          error="no 'net health status' line (rc=0: Success)")
    text = 'ipaddr:\nnetmask:255.255.255.0\n'
    assert parse_ip(text) == base(raw=text, status='error', ip=None, netmask=None,
                                  error="no 'ipaddr:' line (rc=0: netmask:255.255.255.0)")
    text = 'ipaddr: 10.0.0.1\nnetmask:\n'
    assert parse_ip(text) == base(raw=text, ip='10.0.0.1', netmask=None)


def test_vnic_state_line_wins_over_an_error_text():
    text = 'vnic link status: UP\nvnic ipaddr: 10.0.0.1\nThe device is occupied\n'
    assert parse_vnic(text) == vnic(raw=text, fields={'link': 'UP', 'ip': '10.0.0.1'})


# --------------------------------------------------------------------------
# -link -g and -net_health -g
# --------------------------------------------------------------------------

@pytest.mark.parametrize('name,value,status', [
    ('hccn_link_up.txt', 'UP', 'ok'),
    ('hccn_link_down.txt', 'DOWN', 'down'),
])
def test_link_fixtures_whole_result(fixture_text, name, value, status):
    text = fixture_text(name)
    assert parse_link(text) == base(raw=text, status=status, value=value)


@pytest.mark.parametrize('text,rc,stderr,expected', [
    ('  Link Status :  up  \n', 0, '', base(status='ok', value='UP')),
    ('link status: Unknown state\n', 0, '', base(status='down', value='UNKNOWN STATE')),
    ('xlink status: UP\n', 4, '', base(status='error', rc=4, value=None,
                                       error="no 'link status' line (rc=4: xlink status: UP)")),
    ('', 0, '', base(status='error', value=None, error="no 'link status' line (rc=0, no output)")),
    ('', 1, UNSUPPORTED, base(status='unsupported', rc=1, stderr=UNSUPPORTED, error=UNSUPPORTED_ERROR,
                              value=None)),
    (BUSY, 1, '', base(status='busy', rc=1, raw=BUSY, error=BUSY_ERROR, value=None)),
])
def test_link_variants(text, rc, stderr, expected):
    expected = dict(expected, raw=text, rc=rc, stderr=stderr)
    assert parse_link(text, rc, stderr) == expected


@pytest.mark.parametrize('name,value', [('hccn_net_health_success.txt', 'Success'),
                                        ('hccn_net_health_init.txt', 'Init')])
def test_net_health_fixtures_whole_result(fixture_text, name, value):
    text = fixture_text(name)
    assert parse_net_health(text) == base(raw=text, status='ok', value=value)


@pytest.mark.parametrize('text,rc,stderr,expected', [
    ('net health status: Receive timeout  \n', 0, '', base(status='unhealthy', value='Receive timeout')),
    ('NET HEALTH STATUS: INIT\n', 0, '', base(status='ok', value='INIT')),
    ('the net health status: Success\n', 0, '',
     base(status='error', value=None, error="no 'net health status' line (rc=0: the net health status: Success)")),
    ('', 1, UNSUPPORTED, base(status='unsupported', rc=1, stderr=UNSUPPORTED, error=UNSUPPORTED_ERROR,
                              value=None)),
    ('', 1, BUSY, base(status='busy', rc=1, stderr=BUSY, error=BUSY_ERROR, value=None)),
])
def test_net_health_variants(text, rc, stderr, expected):
    expected = dict(expected, raw=text, rc=rc, stderr=stderr)
    assert parse_net_health(text, rc, stderr) == expected


# --------------------------------------------------------------------------
# -tls -g
# --------------------------------------------------------------------------

def test_tls_fixture_whole_results(fixture_text):
    first, second = fixture_text('hccn_tls_grep_switch.txt').splitlines()
    assert parse_tls(first) == base(raw=first, switch=0, preconfigured=1, alarm_days=60)
    assert parse_tls(second) == base(raw=second, switch=1, preconfigured=1, alarm_days=60)


@pytest.mark.parametrize('text,rc,stderr,expected', [
    ('TLS SWITCH [ 1 ] TLS PRECONFIGURED [ 0 ] TLS ALARM TIME THRESHOLD [ 7 ]days\n', 0, '',
     base(switch=1, preconfigured=0, alarm_days=7)),
    ('dev_id:2, tls switch[1](0:disable, 1:enable)\n', 0, '', base(switch=1, preconfigured=None, alarm_days=None)),
    ('dev_id:2, tls switch[x]\n', 5, '',
     base(status='error', rc=5, switch=None, preconfigured=None, alarm_days=None,
          error="no 'tls switch[N]' in the output (rc=5: dev_id:2, tls switch[x])")),
    ('', 1, UNSUPPORTED, base(status='unsupported', rc=1, stderr=UNSUPPORTED, error=UNSUPPORTED_ERROR,
                              switch=None, preconfigured=None, alarm_days=None)),
    ('', 1, BUSY, base(status='busy', rc=1, stderr=BUSY, error=BUSY_ERROR,
                       switch=None, preconfigured=None, alarm_days=None)),
])
def test_tls_variants(text, rc, stderr, expected):
    expected = dict(expected, raw=text, rc=rc, stderr=stderr)
    assert parse_tls(text, rc, stderr) == expected


def test_tls_lines_keep_only_lines_with_a_device_and_a_switch():
    text = ('dev_id:3, tls switch[1](0:disable, 1:enable)\n'
            'tls switch[0] without a device\n'
            'dev_id:4, no switch here\n'
            'device 12 , tls switch [ 0 ]\n'
            'DEV_ID : 5 , TLS SWITCH[1]\n')
    assert list(parse_tls_lines(text).items()) == [(3, 1), (12, 0), (5, 1)]
    assert parse_tls_lines(None) == {}
    assert parse_tls_lines('') == {}


# --------------------------------------------------------------------------
# -ip -g
# --------------------------------------------------------------------------

def test_ip_fixture_whole_result(fixture_text):
    text = fixture_text('hccn_ip_sample.txt')
    assert parse_ip(text) == base(raw=text, ip='10.xx.xx.10', netmask='255.255.255.0')


@pytest.mark.parametrize('text,rc,stderr,expected', [
    ('  IPADDR : 10.0.0.1\n', 0, '', base(ip='10.0.0.1', netmask=None)),
    # exit 13 with an address is still an address; the message wins over everything
    ('ipaddr:10.0.0.1\nnetmask:255.0.0.0\n', 13, '', base(rc=13, ip='10.0.0.1', netmask='255.0.0.0')),
    ('ipaddr:10.0.0.1\n', 0, NO_IP, base(status='unset', stderr=NO_IP, ip=None, netmask=None)),
    ('', 13, '', base(status='unset', rc=13, ip=None, netmask=None)),
    (NO_IP, 1, '', base(status='unset', rc=1, ip=None, netmask=None)),
    ('', 12, 'get ip failed\n', base(status='error', rc=12, ip=None, netmask=None,
                                     error="no 'ipaddr:' line (rc=12: get ip failed)")),
    ('', 1, UNSUPPORTED, base(status='unsupported', rc=1, error=UNSUPPORTED_ERROR, ip=None, netmask=None)),
    ('', 1, BUSY, base(status='busy', rc=1, error=BUSY_ERROR, ip=None, netmask=None)),
])
def test_ip_variants(text, rc, stderr, expected):
    expected = dict(expected, raw=text, rc=rc, stderr=stderr)
    assert parse_ip(text, rc, stderr) == expected


# --------------------------------------------------------------------------
# -hccs_ping -g
# --------------------------------------------------------------------------

def ping(**fields):
    out = {'target': None, 'success': 0, 'failed_packets': 0, 'transmitted': None, 'received': None,
           'loss_pct': None, 'times_us': {}}
    out.update(fields)
    return out


def test_hccs_ping_fixture_whole_result(fixture_text):
    text = fixture_text('hccn_hccs_ping_synthetic.txt')
    assert parse_hccs_ping(text) == base(raw=text, **ping(
        target='192.168.2.200', success=3, transmitted=3, received=3, loss_pct=0.0,
        times_us={'max': 12.345, 'min': 9.876, 'average': 10.78, 'tp95': 12.345}))


PKT_OK = 'This pkt ping success!\n'
PKT_SEND_FAIL = 'This pkt send fail!\n'
PKT_RECV_FAIL = 'This pkt check recv msg fail!\n'
PKT_NOT_START = 'This pkt ping not start!\n'


@pytest.mark.parametrize('text,rc,expected_count,expected', [
    # the summary decides: all back, some back, none back
    ('device 1 PING 10.0.0.2\n' + PKT_OK * 2 + '2 packets transmitted, 2 received, 0.00% packets loss\n', 0, None,
     ping(target='10.0.0.2', success=2, transmitted=2, received=2, loss_pct=0.0, status='ok')),
    ('PING 10.0.0.2\n' + PKT_OK + PKT_SEND_FAIL + '2 packets transmitted, 1 received, 50.00% packets loss\n', 0, None,
     ping(target='10.0.0.2', success=1, failed_packets=1, transmitted=2, received=1, loss_pct=50.0, status='loss')),
    (PKT_RECV_FAIL + PKT_NOT_START + '2 Packets Transmitted ,0 received , 100 % packet loss\n', 0, None,
     ping(failed_packets=2, transmitted=2, received=0, loss_pct=100.0, status='failed')),
    # nothing sent is no success
    ('0 packets transmitted, 0 received, 0.00% packets loss\n', 0, None,
     ping(transmitted=0, received=0, loss_pct=0.0, status='failed')),
    # more received than sent still counts as all back
    ('1 packet transmitted, 2 received, 0% packets loss\n', 0, None,
     ping(transmitted=1, received=2, loss_pct=0.0, status='ok')),
    # no summary line: complete per-packet lines are enough
    (PKT_OK * 3, 0, 3, ping(success=3, transmitted=3, received=3, loss_pct=0.0, status='ok')),
    (PKT_OK * 3, 0, None, ping(success=3, transmitted=3, received=3, loss_pct=0.0, status='ok')),
    (PKT_OK * 4, 0, 3, ping(success=4, transmitted=4, received=4, loss_pct=0.0, status='ok')),
    # ... but not too few, not with a failed packet, not with a failing exit code
    (PKT_OK * 2, 0, 3, ping(success=2, transmitted=2, received=2, status='loss')),
    (PKT_OK * 2 + PKT_SEND_FAIL, 0, None, ping(success=2, failed_packets=1, transmitted=3, received=2,
                                               status='loss')),
    (PKT_OK * 2, 1, None, ping(success=2, transmitted=2, received=2, status='loss')),
    (PKT_SEND_FAIL * 2, 0, None, ping(failed_packets=2, transmitted=2, received=0, status='failed')),
    ('max time 5us\nTP95 time 7.5 us\n', 3, None,
     ping(times_us={'max': 5.0, 'tp95': 7.5}, status='error', error='no ping summary line (rc=3: TP95 time 7.5 us)')),
])
def test_hccs_ping_variants(text, rc, expected_count, expected):
    expected = dict(base(raw=text, rc=rc), **expected)
    assert parse_hccs_ping(text, rc, '', expected=expected_count) == expected


def test_hccs_ping_errors_come_before_the_output():
    text = 'device 0 PING 10.0.0.2\n' + PKT_OK + '1 packets transmitted, 1 received, 0.00% packets loss\n'
    assert parse_hccs_ping(text, 0, BUSY) == base(raw=text, stderr=BUSY, status='busy', error=BUSY_ERROR, **ping())
    assert parse_hccs_ping(text, 1, UNSUPPORTED) == base(raw=text, rc=1, stderr=UNSUPPORTED, status='unsupported',
                                                         error=UNSUPPORTED_ERROR, **ping())
    assert parse_hccs_ping(None, 1, None) == base(rc=1, status='error', error='no ping summary line (rc=1, no output)',
                                                  **ping())


# --------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------

@pytest.mark.parametrize('args,argv', [
    (('hccn_tool', 0, 'link'), ['hccn_tool', '-i', '0', '-link', '-g']),
    (('hccn_tool', 15, 'net_health'), ['hccn_tool', '-i', '15', '-net_health', '-g']),
    (('hccn_tool', 1, 'tls'), ['hccn_tool', '-i', '1', '-tls', '-g']),
    (('hccn_tool', 2, 'ip'), ['hccn_tool', '-i', '2', '-ip', '-g']),
    (('hccn_tool', 2, 'hccs_ping', '10.0.0.1'), ['hccn_tool', '-i', '2', '-hccs_ping', '-g', 'address', '10.0.0.1']),
    (('hccn_tool', 2, 'hccs_ping', '10.0.0.1', 0), ['hccn_tool', '-i', '2', '-hccs_ping', '-g', 'address',
                                                    '10.0.0.1']),
])
def test_build_argv_every_check(args, argv):
    assert build_argv(*args) == argv


def test_quote_argv_and_tool_timeout_message():
    assert quote_argv(['/opt/my tool', '-i', 3, "it's"]) == "'/opt/my tool' -i 3 'it'\"'\"'s'"
    exc = ToolTimeout(['hccn_tool', '-i', 0, '-vnic', '-g'], 2.5)
    assert str(exc) == 'hccn_tool -i 0 -vnic -g: no answer within 2.5s'
    assert (exc.argv, exc.timeout) == (['hccn_tool', '-i', 0, '-vnic', '-g'], 2.5)


def test_hccs_ping_without_any_output_names_the_tools_error():
    err = 'PING_ext failed. (ret=[5]; logic_id=[0])\n'
    assert parse_hccs_ping('', 1, err) == base(rc=1, stderr=err, status='error', **ping(
        error='no ping summary line (rc=1: PING_ext failed. (ret=[5]; logic_id=[0]))'))


def test_errors_printed_on_stdout_or_stderr():
    # the tool prints 'not supported' on stdout too; an unreadable answer names the last line of stderr
    assert parse_ip(UNSUPPORTED, 1, '') == base(raw=UNSUPPORTED, rc=1, status='unsupported', error=UNSUPPORTED_ERROR,
                                                ip=None, netmask=None)
    assert parse_tls('', 2, 'tls get failed\n') == base(
        rc=2, stderr='tls get failed\n', status='error', switch=None, preconfigured=None, alarm_days=None,
        error="no 'tls switch[N]' in the output (rc=2: tls get failed)")
