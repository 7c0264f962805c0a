# -*- coding: utf-8 -*-
"""Whole results of the hccn filters (plugins/filter/hccn.py): the peers, the TLS failures, the one-line failure
message with its sorting, peer names, option prefix and hints, and every error message."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.hccn import (  # noqa: E402
    hccn_compare_tls,
    hccn_failure_message,
    hccn_peer_map,
)


def raises(func, *args, **kwargs):
    with pytest.raises(AnsibleFilterError) as err:
        func(*args, **kwargs)
    return str(err.value)


# --- hccn_peer_map ---------------------------------------------------------------------------------

def test_peer_map_whole_result_and_skipped_nodes():
    results = {'p0': {'vnic_ips': {'0': '10.0.0.1', '1': '10.0.0.2'}},
               'p1': {'0': '10.0.1.1', '1': '10.0.1.2'},
               'd0': {'devices': [{'device': 1, 'vnic': {'status': 'ok', 'ip': '10.0.2.2'}}]},
               'skipped': None, 'empty': '', 'nothing': {}}
    peers = hccn_peer_map(results, self_node='p0')
    assert peers == {0: ['10.0.1.1'], 1: ['10.0.1.2', '10.0.2.2']}
    assert peers.__class__ is dict and all(v.__class__ is list for v in peers.values())
    assert hccn_peer_map(results, mode='all_pairs', self_node='d0') == {
        1: ['10.0.0.1', '10.0.0.2', '10.0.1.1', '10.0.1.2']}
    assert hccn_peer_map({}) == {}


def test_peer_map_error_messages():
    assert raises(hccn_peer_map, {}, mode='ring') == (
        "hccn_peer_map: mode must be one of same_index, all_pairs, got 'ring'")
    assert raises(hccn_peer_map, ['p0']) == ('hccn_peer_map: the input must be a dict {node: hccn_check result or '
                                             '{device: value}}, got list')
    assert raises(hccn_peer_map, {'p0': {'x': '10.0.0.1'}}) == (
        "hccn_peer_map: cannot read the nodes' vNIC IPs (ValueError: invalid literal for int() with base 10: 'x'); "
        "give each node's registered hccn_check result or a {device: ip} map")
    assert raises(hccn_peer_map, {'p0': {'devices': [{'vnic': {}}]}}) == (
        "hccn_peer_map: cannot read the nodes' vNIC IPs (KeyError: 'device'); "
        "give each node's registered hccn_check result or a {device: ip} map")
    assert raises(hccn_peer_map, {'p0': {None: '10.0.0.1'}}).startswith(
        "hccn_peer_map: cannot read the nodes' vNIC IPs (TypeError: ")


# --- hccn_compare_tls ------------------------------------------------------------------------------

def test_compare_tls_whole_result():
    per_node = {'p0': {'tls': {'0': 0, '1': 0}}, 'p1': {'tls': {'0': 1, '1': 0}}, 'gone': None, 'none': {}}
    failures = hccn_compare_tls(per_node)
    assert failures == [{
        'node': 'p1', 'device': 0, 'check': 'tls', 'seen': 1, 'expected': 0,
        'command': 'hccn_tool -i 0 -tls -g | grep switch',
        'msg': 'node p1 device 0: tls switch 1, expected 0 like the others (values seen: 0 on 3, 1 on 1) '
               '[reproduce on p1: hccn_tool -i 0 -tls -g | grep switch]'}]
    assert failures[0].__class__ is dict
    assert hccn_compare_tls(per_node, scope='device', tool='/t') == [{
        'node': 'p1', 'device': 0, 'check': 'tls', 'seen': 1, 'expected': 0,
        'command': '/t -i 0 -tls -g | grep switch',
        'msg': 'node p1 device 0: tls switch 1, expected 0 like the others (values seen: 0 on 1, 1 on 1) '
               '[reproduce on p1: /t -i 0 -tls -g | grep switch]'}]
    assert hccn_compare_tls({'p0': {'tls': {'0': 1}}, 'p1': {'tls': {'0': 1}}}) == []


def test_compare_tls_error_messages():
    assert raises(hccn_compare_tls, {}, scope='node') == ("hccn_compare_tls: scope must be one of all, device, "
                                                          "got 'node'")
    assert raises(hccn_compare_tls, 'p0') == ('hccn_compare_tls: the input must be a dict {node: hccn_check result '
                                              'or {device: value}}, got str')
    assert raises(hccn_compare_tls, {'p0': {'x': 0}}) == (
        "hccn_compare_tls: cannot read the nodes' TLS switches (ValueError: invalid literal for int() with base 10: "
        "'x'); give each node's registered hccn_check result or a {device: switch} map")
    assert raises(hccn_compare_tls, {'p0': {'devices': [{'tls': {}}]}}) == (
        "hccn_compare_tls: cannot read the nodes' TLS switches (KeyError: 'device'); give each node's registered "
        "hccn_check result or a {device: switch} map")
    assert raises(hccn_compare_tls, {'p0': {None: 0}}).startswith(
        "hccn_compare_tls: cannot read the nodes' TLS switches (TypeError: ")


# --- hccn_failure_message --------------------------------------------------------------------------

PING = {'device': 7, 'check': 'hccs_ping', 'status': 'failed', 'peer': '127.31.0.8',
        'seen': 'to 127.31.0.8: 0 of 3 packets received (100.0% loss)',
        'command': 'hccn_tool -i 7 -hccs_ping -g address 127.31.0.8 cnt 3'}
TLS = {'node': 'p1', 'device': 1, 'check': 'tls', 'seen': 1, 'expected': 0,
       'command': 'hccn_tool -i 1 -tls -g | grep switch', 'msg': 'node p1 device 1: ...'}
LINK = {'device': 2, 'check': 'link', 'status': 'down', 'seen': 'link status: DOWN',
        'command': 'hccn_tool -i 2 -link -g'}
HEALTH = {'device': 1, 'check': 'net_health', 'status': 'unhealthy', 'seen': 'net health status: Fault',
          'command': 'hccn_tool -i 1 -net_health -g'}
BARE = {'check': 'vnic'}

BODY = ('device 1 net_health: net health status: Fault [reproduce: hccn_tool -i 1 -net_health -g]; '
        'device 1 tls: tls switch 1, but the other devices/nodes have 0 (1 = enable, 0 = disable) '
        '[reproduce: hccn_tool -i 1 -tls -g | grep switch]; '
        'device 2 link: link status: DOWN [reproduce: hccn_tool -i 2 -link -g]; '
        'device 7 hccs_ping: to p0 device 7 (127.31.0.8): 0 of 3 packets received (100.0% loss) '
        '[reproduce: hccn_tool -i 7 -hccs_ping -g address 127.31.0.8 cnt 3]; '
        'device ? vnic: ? [reproduce: ?]')


def test_failure_message_whole_text():
    failures = [PING, TLS, BARE, LINK, HEALTH]
    before = copy.deepcopy(failures)
    msg = hccn_failure_message(failures, node='p1', option_prefix='preflight_',
                               peer_names={'127.31.0.8': 'p0 device 7'})
    assert msg == (
        'p1: 5 NPU network check(s) failed on 4 device(s) [1, 2, 7, ?]: ' + BODY + '. What to do: '
        'net_health: only Success and Init are healthy; check the RoCE port of the chip and its detect IP '
        '(hccn_tool -i N -netdetect -g, /etc/hccn.conf), or set preflight_strict_net_health: false to make this '
        'advisory; '
        'tls: the TLS switch must be identical on every device of every node (hccn_tool -i N -tls -s enable 0|1); '
        'link: link can read DOWN on healthy HCCS-connected A3 machines; set preflight_strict_link: false to make '
        'this advisory; '
        'hccs_ping: check the HCCS/super-pod fabric between the nodes and the peer vNIC IP (run the command by hand '
        'on this node); '
        'vnic: bring the vNIC up and give it an IP (check /etc/hccn.conf and the driver on that device)')
    assert failures == before          # the input is left as it was
    assert hccn_failure_message(tuple(failures), hints=False, peer_names={'127.31.0.8': 'p0 device 7'}) == (
        '5 NPU network check(s) failed on 4 device(s) [1, 2, 7, ?]: ' + BODY)


def test_failure_message_without_prefix_keeps_the_option_names():
    msg = hccn_failure_message([LINK, HEALTH])
    assert msg == (
        '2 NPU network check(s) failed on 2 device(s) [1, 2]: '
        'device 1 net_health: net health status: Fault [reproduce: hccn_tool -i 1 -net_health -g]; '
        'device 2 link: link status: DOWN [reproduce: hccn_tool -i 2 -link -g]. What to do: '
        'net_health: only Success and Init are healthy; check the RoCE port of the chip and its detect IP '
        '(hccn_tool -i N -netdetect -g, /etc/hccn.conf), or set strict_net_health=false to make this advisory; '
        'link: link can read DOWN on healthy HCCS-connected A3 machines; set strict_link=false to make this '
        'advisory')


@pytest.mark.parametrize('failure,seen', [
    # a compare_tls failure that could not be read
    (dict(TLS, seen=None), 'tls switch could not be read'),
    # a tls failure of hccn_check itself (no 'expected'): passed through
    ({'device': 1, 'check': 'tls', 'seen': 'no tls switch', 'command': 'c'}, 'no tls switch'),
    # the peer is named once, only when known
    (dict(PING, seen='to 127.31.0.8: to 127.31.0.8: x'), 'to p0 device 7 (127.31.0.8): to 127.31.0.8: x'),
    (dict(PING, peer='127.31.0.9'), 'to 127.31.0.8: 0 of 3 packets received (100.0% loss)'),
    (dict(PING, seen=None), 'None'),
    (dict(PING, peer=''), 'to 127.31.0.8: 0 of 3 packets received (100.0% loss)'),
])
def test_failure_message_seen_sentence(failure, seen):
    msg = hccn_failure_message([failure], hints=False, peer_names={'127.31.0.8': 'p0 device 7', '': 'empty'})
    device, check = failure['device'], failure['check']
    assert msg == '1 NPU network check(s) failed on 1 device(s) [%s]: device %s %s: %s [reproduce: %s]' % (
        device, device, check, seen, failure['command'])


def test_failure_message_sorts_ints_before_other_device_names():
    items = [dict(LINK, device='b'), dict(LINK, device=10), dict(LINK, device='a', check='ip'), dict(LINK, device=3)]
    msg = hccn_failure_message(items, hints=False)
    assert msg.startswith('4 NPU network check(s) failed on 4 device(s) [3, 10, a, b]: device 3 link: ')
    assert [part.split(' ')[1] for part in msg.split(': ', 1)[1].split('; ')] == ['3', '10', 'a', 'b']


def test_failure_message_empty_and_errors():
    assert hccn_failure_message([]) == ''
    assert hccn_failure_message({}, node='p0') == ''
    assert hccn_failure_message('') == ''
    assert raises(hccn_failure_message, 'x') == 'hccn_failure_message: the input must be a list of failures, got str'
    assert raises(hccn_failure_message, {'device': 1}) == ('hccn_failure_message: the input must be a list of '
                                                           'failures, got dict')
    assert raises(hccn_failure_message, [LINK], peer_names=['p0']) == (
        'hccn_failure_message: peer_names must be a dict {ip: name}, got list')
    assert hccn_failure_message([LINK], peer_names={}, hints=False) == (
        '1 NPU network check(s) failed on 1 device(s) [2]: device 2 link: link status: DOWN '
        '[reproduce: hccn_tool -i 2 -link -g]')


def test_a_node_result_that_is_not_a_map_is_an_error_but_an_empty_one_is_skipped():
    # '' (a host whose first pass did not run) is left out; any other string cannot be read
    assert hccn_peer_map({'p0': {'0': '10.0.0.1'}, 'p1': ''}, self_node='p1') == {0: ['10.0.0.1']}
    assert raises(hccn_peer_map, {'p0': {'0': '10.0.0.1'}, 'p1': 'XXXX'}) == (
        "hccn_peer_map: cannot read the nodes' vNIC IPs (AttributeError: 'str' object has no attribute 'items'); "
        "give each node's registered hccn_check result or a {device: ip} map")
    assert raises(hccn_compare_tls, {'p0': {'0': 1}, 'p1': 'XXXX'}) == (
        "hccn_compare_tls: cannot read the nodes' TLS switches (AttributeError: 'str' object has no attribute "
        "'items'); give each node's registered hccn_check result or a {device: switch} map")
    assert hccn_compare_tls({'p0': {'0': 1}, 'p1': ''}) == []


def test_failure_message_without_a_check_names_it_unknown():
    assert hccn_failure_message([{'device': 1, 'seen': 'x', 'command': 'c'},
                                 dict(LINK, device=1, command='hccn_tool -i 1 -link -g')]) == (
        '2 NPU network check(s) failed on 1 device(s) [1]: device 1 ?: x [reproduce: c]; '
        'device 1 link: link status: DOWN [reproduce: hccn_tool -i 1 -link -g]. What to do: '
        'link: link can read DOWN on healthy HCCS-connected A3 machines; set strict_link=false to make this '
        'advisory')


def test_names_sort_after_device_ids_below_a_million():
    # real device ids are 0-15; a name (e.g. '?') sorts as 10**6
    items = [dict(LINK, device=1500000), dict(LINK, device='x'), dict(LINK, device=100)]
    assert hccn_failure_message(items, hints=False).startswith(
        '3 NPU network check(s) failed on 3 device(s) [100, x, 1500000]: ')
