# -*- coding: utf-8 -*-
"""Inputs and the cross-node helpers of plugins/module_utils/_hccn.py, whole results pinned.

resolve_devices / normalize_peers (the module's options, with their error messages), peer_map (whom each
device pings, from every node's vNIC IPs in each accepted shape) and compare_tls (the failures, with their
expected value, reproduce command and message).
"""

from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    compare_tls,
    normalize_peers,
    peer_map,
    resolve_devices,
)


# --------------------------------------------------------------------------
# resolve_devices / normalize_peers
# --------------------------------------------------------------------------

@pytest.mark.parametrize('devices,count,expected', [
    ([5, '2', 2.0, 0], None, [0, 2, 5]),
    ([3], 16, [3]),                      # explicit devices win over the count
    (None, 1, [0]),
    ([], 2, [0, 1]),
    (None, '3', [0, 1, 2]),
])
def test_resolve_devices(devices, count, expected):
    assert resolve_devices(devices, count) == expected


@pytest.mark.parametrize('devices,count,message', [
    (['x', 1], None, "devices must be a list of integers (NPU Phy-IDs), got ['x', 1]"),
    ([None], None, 'devices must be a list of integers (NPU Phy-IDs), got [None]'),
    (None, 0, 'device_count must be at least 1, got 0'),
    (None, -2, 'device_count must be at least 1, got -2'),
    (None, None, 'set devices (a list of NPU Phy-IDs) or device_count'),
    ([], None, 'set devices (a list of NPU Phy-IDs) or device_count'),
    ([2, -1], None, 'device ids cannot be negative: [-1, 2]'),
])
def test_resolve_devices_errors(devices, count, message):
    with pytest.raises(ValueError) as err:
        resolve_devices(devices, count)
    assert str(err.value) == message


@pytest.mark.parametrize('peers,devices,expected', [
    (None, [0], {}),
    ({}, [0], {}),
    ('10.0.0.1', [0, 1], {0: ['10.0.0.1'], 1: ['10.0.0.1']}),
    ([' 10.0.0.1 ', '10.0.0.1', '::1'], [2], {2: ['10.0.0.1', '::1']}),
    ({'0': None, '1': ('10.0.0.2',), 3: '10.0.0.3'}, [0, 1], {0: [], 1: ['10.0.0.2']}),
    ({1: b'10.0.0.9'.decode()}, [1], {1: ['10.0.0.9']}),
])
def test_normalize_peers(peers, devices, expected):
    assert normalize_peers(peers, devices) == expected


@pytest.mark.parametrize('peers,message', [
    ({'a': ['10.0.0.1']}, "peers: key 'a' is not a device id"),
    ({None: ['10.0.0.1']}, 'peers: key None is not a device id'),
    ({'0': {'ip': '10.0.0.1'}}, "peers[0]: expected a list of IP addresses, got {'ip': '10.0.0.1'}"),
    ({'0': ['10.0.0.1', '0.0.0.0']}, "peers[0]: '0.0.0.0' is not an IP address"),
    (['10.0.0.1', 'host'], "peers: 'host' is not an IP address"),
    (5, 'peers: expected a list of IP addresses, got 5'),
])
def test_normalize_peers_errors(peers, message):
    with pytest.raises(ValueError) as err:
        normalize_peers(peers, [0])
    assert str(err.value) == message


def test_normalize_peers_bytes_ip_is_one_address():
    with pytest.raises(ValueError) as err:
        normalize_peers(b'10.0.0.1', [0])
    assert str(err.value) == "peers: \"b'10.0.0.1'\" is not an IP address"


# --------------------------------------------------------------------------
# peer_map
# --------------------------------------------------------------------------

NODES = {
    'p0': {0: '10.0.0.1', 1: '10.0.0.2'},
    'p1': {0: '10.0.1.1', 1: None},
    'd0': {1: '10.0.2.2', 0: '10.0.2.1', 2: '10.0.2.3'},
}


@pytest.mark.parametrize('mode,self_node,expected', [
    ('same_index', 'p0', {0: ['10.0.1.1', '10.0.2.1'], 1: ['10.0.2.2']}),
    ('same_index', 'd0', {0: ['10.0.0.1', '10.0.1.1'], 1: ['10.0.0.2'], 2: []}),
    ('all_pairs', 'p1', {0: ['10.0.0.1', '10.0.0.2', '10.0.2.1', '10.0.2.2', '10.0.2.3'],
                         1: ['10.0.0.1', '10.0.0.2', '10.0.2.1', '10.0.2.2', '10.0.2.3']}),
    # no self node (or one not in the input): every node is a peer, every device of any node is local
    ('same_index', None, {0: ['10.0.0.1', '10.0.1.1', '10.0.2.1'], 1: ['10.0.0.2', '10.0.2.2'], 2: ['10.0.2.3']}),
    ('same_index', 'x9', {0: ['10.0.0.1', '10.0.1.1', '10.0.2.1'], 1: ['10.0.0.2', '10.0.2.2'], 2: ['10.0.2.3']}),
])
def test_peer_map_modes(mode, self_node, expected):
    peers = peer_map(NODES, mode=mode, self_node=self_node)
    assert peers == expected
    assert list(peers) == sorted(expected)
    for device, ips in expected.items():
        assert peers[device] == ips


def test_peer_map_self_node_without_ips_takes_every_device_and_skips_own_and_repeated_ips():
    nodes = {'p0': {}, 'p1': {0: '10.0.1.1', 1: '10.0.9.9'}, 'd0': {1: '10.0.9.9', 0: '10.0.0.5'},
             'd1': {0: '10.0.0.5'}}
    assert peer_map(nodes, self_node='p0') == {0: ['10.0.1.1', '10.0.0.5'], 1: ['10.0.9.9']}
    # an IP of the node itself (a misconfigured duplicate) is never its peer
    nodes = {'p0': {0: '10.0.0.5', 1: '10.0.0.6'}, 'd0': {0: '10.0.0.5', 1: '10.0.0.7'}}
    assert peer_map(nodes, mode='all_pairs', self_node='p0') == {0: ['10.0.0.7'], 1: ['10.0.0.7']}


def test_peer_map_reads_every_result_shape():
    registered = {'vnic_ips': {'1': '10.0.1.2', '0': '10.0.1.1'}, 'devices': 'ignored'}
    listed = {'devices': [{'device': '0', 'vnic': {'status': 'ok', 'ip': '10.0.2.1'}},
                          {'device': 1, 'vnic': {'status': 'no_ip', 'ip': '10.0.2.99'}},
                          {'device': 2}]}
    broken = {'vnic_ips': None, 'devices': [{'device': 0, 'vnic': {'status': 'ok', 'ip': '10.0.3.1'}}]}
    nodes = {'me': {0: '10.0.0.1', 1: '10.0.0.2', 2: '10.0.0.3'}, 'reg': registered, 'list': listed,
             'broken': broken, 'gone': None}
    assert peer_map(nodes, self_node='me') == {0: ['10.0.1.1', '10.0.2.1', '10.0.3.1'], 1: ['10.0.1.2'], 2: []}


def test_peer_map_bad_mode_and_bad_keys():
    with pytest.raises(ValueError) as err:
        peer_map(NODES, mode='ring')
    assert str(err.value) == "mode must be one of same_index, all_pairs, got 'ring'"
    with pytest.raises(ValueError):
        peer_map({'p0': {'x': '10.0.0.1'}})


# --------------------------------------------------------------------------
# compare_tls
# --------------------------------------------------------------------------

def tls_failure(node, device, seen, expected, why, tool='hccn_tool'):
    cmd = '%s -i %s -tls -g | grep switch' % (tool, device)
    return {'node': node, 'device': device, 'check': 'tls', 'seen': seen, 'expected': expected, 'command': cmd,
            'msg': 'node %s device %s: tls switch %s, %s [reproduce on %s: %s]'
                   % (node, device, 'unreadable' if seen is None else seen, why, node, cmd)}


def test_compare_tls_majority_and_unreadable_whole_failures():
    per_node = {'p0': {0: 0, 1: 0}, 'p1': {0: 0, 1: 1}, 'd0': {'0': None, '1': 0}}
    assert compare_tls(per_node) == [
        {'node': 'p1', 'device': 1, 'check': 'tls', 'seen': 1, 'expected': 0,
         'command': 'hccn_tool -i 1 -tls -g | grep switch',
         'msg': 'node p1 device 1: tls switch 1, expected 0 like the others (values seen: 0 on 4, 1 on 1) '
                '[reproduce on p1: hccn_tool -i 1 -tls -g | grep switch]'},
        {'node': 'd0', 'device': 0, 'check': 'tls', 'seen': None, 'expected': 0,
         'command': 'hccn_tool -i 0 -tls -g | grep switch',
         'msg': 'node d0 device 0: tls switch unreadable, could not be read '
                '[reproduce on d0: hccn_tool -i 0 -tls -g | grep switch]'},
    ]


def test_compare_tls_scope_device_groups_per_device():
    per_node = {'p0': {0: 1, 1: 0}, 'p1': {0: 1, 1: 0}, 'd0': {0: 0, 1: 0}}
    assert compare_tls(per_node, scope='device') == [
        tls_failure('d0', 0, 0, 1, 'expected 1 like the others (values seen: 0 on 1, 1 on 2)')]
    assert compare_tls(per_node, scope='all') == [
        tls_failure('p0', 0, 1, 0, 'expected 0 like the others (values seen: 0 on 4, 1 on 2)'),
        tls_failure('p1', 0, 1, 0, 'expected 0 like the others (values seen: 0 on 4, 1 on 2)')]


def test_compare_tls_tie_goes_to_the_lowest_value():
    per_node = {'a': {0: 2}, 'b': {0: 1}, 'c': {0: 2}, 'd': {0: 1}, 'e': {0: 0}}
    why = 'expected 1 like the others (values seen: 0 on 1, 1 on 2, 2 on 2)'
    assert compare_tls(per_node) == [tls_failure('a', 0, 2, 1, why), tls_failure('c', 0, 2, 1, why),
                                     tls_failure('e', 0, 0, 1, why)]


def test_compare_tls_nothing_readable():
    assert compare_tls({'a': {0: None}, 'b': {3: None}}, scope='device') == [
        tls_failure('a', 0, None, None, 'could not be read'), tls_failure('b', 3, None, None, 'could not be read')]
    assert compare_tls({}) == []


def test_compare_tls_reads_result_shapes_and_tool_paths():
    per_node = {
        'reg': {'tls': {'0': 1}},
        'list': {'devices': [{'device': '0', 'tls': {'switch': 0}}, {'device': 1}]},
        'plain': {0: 0},
        'gone': None,
    }
    tools = {'reg': '/opt/my tools/hccn_tool', 'list': ''}
    assert compare_tls(per_node, tool=tools) == [
        tls_failure('reg', 0, 1, 0, 'expected 0 like the others (values seen: 0 on 2, 1 on 1)',
                    tool="'/opt/my tools/hccn_tool'"),
        tls_failure('list', 1, None, 0, 'could not be read'),
    ]
    assert compare_tls(per_node, tool='/x/hccn_tool')[1]['command'] == '/x/hccn_tool -i 1 -tls -g | grep switch'


def test_compare_tls_bad_scope():
    with pytest.raises(ValueError) as err:
        compare_tls({}, scope='node')
    assert str(err.value) == "scope must be one of all, device, got 'node'"
