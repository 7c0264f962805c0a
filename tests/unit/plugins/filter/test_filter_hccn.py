# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/hccn.py (hccn_peer_map, hccn_compare_tls, hccn_failure_message)."""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter import hccn  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.filter.hccn import (  # noqa: E402
    FilterModule,
    hccn_compare_tls,
    hccn_failure_message,
    hccn_peer_map,
)
from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import PEER_MODES, TLS_SCOPES  # noqa: E402

NODES = ('p0', 'p1', 'd0', 'd1')


def vnic_ips(index, devices=16, down=()):
    """A node's registered pass-1 result as hccn_check returns it (string keys, None when the vNIC failed)."""
    return {'vnic_ips': dict((str(d), None if d in down else '127.31.%d.%d' % (index, d + 1)) for d in range(devices))}


def tls(devices=16, **switches):
    return {'tls': dict((str(d), int(switches.get('d%d' % d, 0))) for d in range(devices))}


def test_filters_are_registered():
    assert sorted(FilterModule().filters()) == ['hccn_compare_tls', 'hccn_failure_message', 'hccn_peer_map']


def test_each_filter_has_its_own_documentation():
    """hccn.py provides three filters, so each has a doc file of its own (ansible-doc would show a DOCUMENTATION of
    hccn.py for all three), with the choices the code accepts."""
    assert not hasattr(hccn, 'DOCUMENTATION')
    docs = {}
    for name in FilterModule().filters():
        with open(os.path.join(os.path.dirname(hccn.__file__), name + '.yml'), encoding='utf-8') as handle:
            docs[name] = yaml.safe_load(handle)
        assert docs[name]['DOCUMENTATION']['name'] == name
        assert yaml.safe_load(docs[name]['EXAMPLES'])
    assert docs['hccn_peer_map']['DOCUMENTATION']['options']['mode']['choices'] == list(PEER_MODES)
    assert docs['hccn_compare_tls']['DOCUMENTATION']['options']['scope']['choices'] == list(TLS_SCOPES)
    assert docs['hccn_failure_message']['RETURN']['_value']['type'] == 'str'


# --- hccn_peer_map ---------------------------------------------------------------------------------

def test_peer_map_same_index_four_nodes_sixteen_devices():
    results = dict((n, vnic_ips(i)) for i, n in enumerate(NODES))
    peers = hccn_peer_map(results, self_node='p1')
    assert sorted(peers) == list(range(16))
    assert all(isinstance(k, int) for k in peers)
    assert peers[0] == ['127.31.0.1', '127.31.2.1', '127.31.3.1']
    assert peers[15] == ['127.31.0.16', '127.31.2.16', '127.31.3.16']
    assert not any(ip.startswith('127.31.1.') for ips in peers.values() for ip in ips)


def test_peer_map_all_pairs():
    results = dict((n, vnic_ips(i, devices=4)) for i, n in enumerate(NODES))
    peers = hccn_peer_map(results, mode='all_pairs', self_node='d0')
    assert len(peers[0]) == 12 and peers[0] == peers[3]
    assert '127.31.2.1' not in peers[0]


def test_peer_map_skips_devices_without_ip_and_missing_nodes():
    results = {'p0': vnic_ips(0, devices=2), 'p1': vnic_ips(1, devices=2, down=[1]),
               'd0': {}, 'd1': None}                         # d0/d1: pass 1 did not run there
    peers = hccn_peer_map(results, self_node='p0')
    assert peers == {0: ['127.31.1.1'], 1: []}


def test_peer_map_accepts_plain_maps():
    plain = {'p0': {0: '10.0.0.1'}, 'p1': {'0': '10.0.1.1'}}
    assert hccn_peer_map(plain, self_node='p0') == {0: ['10.0.1.1']}


def test_peer_map_rejects_bad_input():
    with pytest.raises(AnsibleFilterError, match='mode must be one of'):
        hccn_peer_map({'p0': vnic_ips(0)}, mode='ring')
    with pytest.raises(AnsibleFilterError, match='must be a dict'):
        hccn_peer_map(['p0'])
    with pytest.raises(AnsibleFilterError, match='cannot read'):
        hccn_peer_map({'p0': {'x': '10.0.0.1'}}, self_node='p0')


# --- hccn_compare_tls ------------------------------------------------------------------------------

def test_compare_tls_consistent():
    assert hccn_compare_tls(dict((n, tls()) for n in NODES)) == []


def test_compare_tls_one_device_differs():
    per_node = dict((n, tls()) for n in NODES)
    per_node['d1'] = tls(d0=1)
    failures = hccn_compare_tls(per_node, tool='/usr/local/Ascend/driver/tools/hccn_tool')
    assert len(failures) == 1
    f = failures[0]
    assert (f['node'], f['device'], f['check'], f['seen'], f['expected']) == ('d1', 0, 'tls', 1, 0)
    assert f['command'] == '/usr/local/Ascend/driver/tools/hccn_tool -i 0 -tls -g | grep switch'
    assert 'node d1 device 0' in f['msg'] and 'values seen: 0 on 63, 1 on 1' in f['msg']


def test_compare_tls_scope_device_and_bad_scope():
    per_node = dict((n, {'tls': {'0': 0, '1': 1}}) for n in NODES)
    assert hccn_compare_tls(per_node, scope='device') == []
    assert len(hccn_compare_tls(per_node)) == 4
    with pytest.raises(AnsibleFilterError, match='scope must be one of'):
        hccn_compare_tls(per_node, scope='node')


def test_compare_tls_unreadable_and_skipped_nodes():
    failures = hccn_compare_tls({'p0': {'tls': {'0': 0}}, 'p1': {'tls': {'0': None}}, 'd0': {}})
    assert [(f['node'], f['seen']) for f in failures] == [('p1', None)]


# --- hccn_failure_message --------------------------------------------------------------------------

VNIC_DOWN = {'device': 5, 'check': 'vnic', 'status': 'down', 'seen': 'vnic link status DOWN (ipaddr 127.31.3.6)',
             'command': 'hccn_tool -i 5 -vnic -g'}
PING_FAIL = {'device': 7, 'check': 'hccs_ping', 'status': 'failed', 'peer': '127.31.0.8',
             'seen': 'to 127.31.0.8: 0 of 3 packets received (100.0% loss)',
             'command': 'hccn_tool -i 7 -hccs_ping -g address 127.31.0.8 cnt 3'}


def test_failure_message_empty():
    assert hccn_failure_message([]) == ''
    assert hccn_failure_message(None, node='p0') == ''


def test_failure_message_lists_every_device_with_command_and_advice():
    msg = hccn_failure_message([PING_FAIL, VNIC_DOWN], node='d1')
    assert msg.startswith('d1: 2 NPU network check(s) failed on 2 device(s) [5, 7]: device 5 vnic: ')
    assert msg.index('device 5') < msg.index('device 7')
    assert '[reproduce: hccn_tool -i 5 -vnic -g]' in msg
    assert '[reproduce: hccn_tool -i 7 -hccs_ping -g address 127.31.0.8 cnt 3]' in msg
    assert 'What to do: vnic: bring the vNIC up' in msg and 'hccs_ping: check the HCCS' in msg


def test_failure_message_from_compare_tls_and_option_prefix():
    per_node = dict((n, tls(devices=2)) for n in NODES)
    per_node['p1'] = tls(devices=2, d1=1)
    failures = [f for f in hccn_compare_tls(per_node) if f['node'] == 'p1']
    strict = {'device': 2, 'check': 'link', 'status': 'down', 'seen': 'link status: DOWN',
              'command': 'hccn_tool -i 2 -link -g'}
    msg = hccn_failure_message(failures + [strict], node='p1', option_prefix='preflight_')
    assert 'device 1 tls: tls switch 1, but the other devices/nodes have 0' in msg
    assert '[reproduce: hccn_tool -i 1 -tls -g | grep switch]' in msg
    assert 'set preflight_strict_link: false' in msg
    fault = {'device': 4, 'check': 'net_health', 'status': 'unhealthy', 'seen': 'net health status: Fault',
             'command': 'hccn_tool -i 4 -net_health -g'}
    msg = hccn_failure_message([fault], node='d1', option_prefix='preflight_')
    assert msg.startswith('d1: 1 NPU network check(s) failed on 1 device(s) [4]: device 4 net_health: '
                          'net health status: Fault [reproduce: hccn_tool -i 4 -net_health -g]')
    assert 'set preflight_strict_net_health: false to make this advisory' in msg
    assert 'strict_net_health=false' not in msg
    assert hccn_failure_message(failures, hints=False).startswith('1 NPU network check(s) failed on 1 device(s) [1]: ')
    assert 'What to do' not in hccn_failure_message(failures, hints=False)


def test_failure_message_names_the_peer_node():
    msg = hccn_failure_message([PING_FAIL], peer_names={'127.31.0.8': 'p0 device 7'})
    assert 'device 7 hccs_ping: to p0 device 7 (127.31.0.8): 0 of 3 packets received' in msg
    assert 'to 127.31.0.8: 0 of 3' in hccn_failure_message([PING_FAIL], peer_names={'10.0.0.1': 'x'})
    with pytest.raises(AnsibleFilterError, match='peer_names must be a dict'):
        hccn_failure_message([PING_FAIL], peer_names=['p0'])


def test_failure_message_rejects_non_list():
    with pytest.raises(AnsibleFilterError, match='list of failures'):
        hccn_failure_message({'device': 1}, node='p0')
