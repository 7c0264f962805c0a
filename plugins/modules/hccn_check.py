#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.vllm_pd contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: hccn_check
short_description: Check the NPU network of one node with C(hccn_tool)
description:
  - Runs the C(hccn_tool -i N ... -g) queries of the A3 checklist for every NPU device of the node and
    judges them. Devices are queried in parallel; the commands of one device run one after another
    (C(hccn_tool) refuses a second command on a busy device).
  - "Hard gates: the vNIC is C(UP) with an IP (C(-vnic -g)); C(-hccs_ping) to every peer in O(peers)
    receives every packet; the TLS switch can be read (C(-tls -g)). A board without C(hccs_ping)
    (C(This device does not support this function.)) gives a warning, not a failure."
  - "C(-net_health -g) is a hard gate too (O(strict_net_health) true by default): C(Success) and C(Init) pass
    (healthy HCCS-connected A3 chips read C(Init)); C(Fault), C(Socket fail), C(Receive timeout), C(Unreachable),
    C(Time exceeded), C(Thread error), C(Detect ip set), any other state and output without a state fail. A
    board that does not support the query gives a warning."
  - "Advisory unless made strict: C(-link -g) not C(UP) (O(strict_link)); it reads DOWN on healthy
    HCCS-connected A3 machines. C(-ip -g) (the RoCE IP, exit 13 C(no ip was preset) when unset) is always
    advisory."
  - TLS must also be identical across nodes; the module returns each device's switch in RV(tls) so the
    controller can compare the nodes (the collection's C(compare_tls) helper).
  - The module fails with one message that lists every failing device of the node with the check, what
    was seen and the command to reproduce it by hand.
  - The module only reads; it runs the same way in check mode and never reports a change.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
requirements:
  - C(hccn_tool) from the Ascend driver on the target.
options:
  devices:
    description:
      - NPU device ids to check (the Phy-ID that C(hccn_tool -i) takes, 0-15 on an A3).
      - Exactly one of O(devices) and O(device_count) is required.
    type: list
    elements: int
  device_count:
    description:
      - Check devices C(0) to O(device_count) - 1.
    type: int
  hccn_tool_path:
    description:
      - Name or path of C(hccn_tool). A bare name is looked up in E(PATH), C(/usr/local/Ascend/driver/tools),
        C(/usr/local/sbin), C(/usr/local/bin) and C(/usr/bin).
    type: str
    default: hccn_tool
  checks:
    description:
      - Which queries to run.
      - V(hccs_ping) runs only for devices that have peers in O(peers).
    type: list
    elements: str
    choices: [vnic, link, net_health, tls, ip, hccs_ping]
    default: [vnic, link, net_health, tls, ip, hccs_ping]
  peers:
    description:
      - vNIC IPs each device pings with C(-hccs_ping).
      - A dict maps a device id to a list of IPs (or one IP); a list means every device pings all of them.
      - Empty (the default) skips the ping, which is what the first pass that only gathers vNIC IPs does.
    type: raw
  ping_count:
    description:
      - Packets per C(hccs_ping) (its C(cnt) argument).
    type: int
    default: 3
  timeout:
    description:
      - Seconds each command may take.
    type: int
    default: 10
  max_workers:
    description:
      - Devices queried at the same time. V(1) runs everything one command at a time.
    type: int
    default: 16
  busy_retries:
    description:
      - Retries (one second apart) of a command that answered C(The device is occupied).
    type: int
    default: 2
  strict_link:
    description:
      - Fail instead of warn when C(-link -g) is not C(UP).
    type: bool
    default: false
  strict_net_health:
    description:
      - Fail when C(-net_health -g) reads a state other than C(Success) or C(Init) (or cannot be read).
      - V(false) turns those failures into warnings (advisory), e.g. on a node whose RoCE detection is
        known to be broken while its HCCS fabric works.
    type: bool
    default: true
extends_documentation_fragment:
  - ascend.vllm_pd.attributes
notes:
  - "Two passes across nodes: first run with no O(peers) on every node (vNIC IPs land in RV(vnic_ips)), then
    build each node's peers from all nodes' RV(vnic_ips) and run again with O(checks=[hccs_ping]) (or all)."
seealso:
  - module: ascend.vllm_pd.npu_smi_info
'''

EXAMPLES = r'''
- name: Pass 1 - local checks, collect vNIC IPs and TLS switches
  ascend.vllm_pd.hccn_check:
    device_count: 16
  register: hccn_local

- name: Pass 2 - hccs_ping the same device index on every other node
  ascend.vllm_pd.hccn_check:
    device_count: 16
    checks: [hccs_ping]
    peers: "{{ hccn_peers }}"   # {0: ['127.31.1.1', '127.31.2.1', ...], 1: [...], ...}

- name: Ping one address from every device, strict link check
  ascend.vllm_pd.hccn_check:
    devices: [0, 1, 2, 3]
    peers: ['192.168.2.200']
    ping_count: 5
    strict_link: true
    hccn_tool_path: /usr/local/Ascend/driver/tools/hccn_tool
'''

RETURN = r'''
devices:
  description: Per device, the parsed result of every query (status, the values read, raw output, command).
  returned: always
  type: list
  elements: dict
  sample:
    - device: 0
      vnic: {status: ok, link: UP, ip: 192.168.2.199, netmask: 255.255.255.0, rc: 0,
             command: hccn_tool -i 0 -vnic -g}
      link: {status: down, value: DOWN, rc: 0, command: hccn_tool -i 0 -link -g}
      hccs_ping:
        - {status: ok, peer: 192.168.2.200, transmitted: 3, received: 3, loss_pct: 0.0,
           command: hccn_tool -i 0 -hccs_ping -g address 192.168.2.200 cnt 3}
summary:
  description: Counts.
  returned: always
  type: dict
  contains:
    devices:
      description: Devices checked.
      type: int
    commands:
      description: Commands run.
      type: int
    failures:
      description: Number of failures.
      type: int
    warnings:
      description: Number of advisory findings.
      type: int
    failed_devices:
      description: Devices with at least one failure.
      type: list
      elements: int
    ok_devices:
      description: Devices without failures.
      type: int
    by_check:
      description: Per check, how many results had each status (ok, down, unhealthy, unset, loss, failed,
        unsupported, busy, timeout, error).
      type: dict
    peers:
      description: Number of hccs_ping targets (0 = ping skipped).
      type: int
  sample: {devices: 16, commands: 80, failures: 0, warnings: 16, failed_devices: [], ok_devices: 16,
           by_check: {vnic: {ok: 16}, link: {down: 16}}, peers: 0}
failures:
  description: Every failed hard gate.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: Device id.
      type: int
    check:
      description: vnic, hccs_ping, tls, net_health (unless O(strict_net_health=false)), or link when strict.
      type: str
    status:
      description: Status of the result.
      type: str
    seen:
      description: What the tool said.
      type: str
    command:
      description: The command to run by hand to see it.
      type: str
    peer:
      description: Target IP (hccs_ping only).
      type: str
  sample:
    - device: 5
      check: vnic
      status: down
      seen: vnic link status DOWN (ipaddr 192.168.2.194)
      command: hccn_tool -i 5 -vnic -g
check_warnings:
  description: Advisory findings, same fields as RV(failures); also summarized as warnings.
  returned: always
  type: list
  elements: dict
tls:
  description: TLS switch per device (0 disable, 1 enable, null when unreadable); compare across nodes.
  returned: when the tls check ran
  type: dict
  sample: {"0": 0, "1": 0}
vnic_ips:
  description: vNIC IP per device (null when the vNIC is not UP with an IP); the input of the peer map.
  returned: when the vnic check ran
  type: dict
  sample: {"0": 192.168.2.199, "1": 192.168.2.198}
hccn_tool:
  description: The hccn_tool binary that was used.
  returned: when found
  type: str
  sample: /usr/local/Ascend/driver/tools/hccn_tool
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    CHECKS,
    failure_message,
    normalize_peers,
    resolve_devices,
    run_checks,
    subprocess_runner,
    summarize_warnings,
)

SEARCH_DIRS = ['/usr/local/Ascend/driver/tools', '/usr/local/sbin', '/usr/local/bin', '/usr/bin']


def _str_keys(mapping):
    return dict((str(k), v) for k, v in mapping.items())


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type='list', elements='int'),
            device_count=dict(type='int'),
            hccn_tool_path=dict(type='str', default='hccn_tool'),
            checks=dict(type='list', elements='str', choices=list(CHECKS), default=list(CHECKS)),
            peers=dict(type='raw'),
            ping_count=dict(type='int', default=3),
            timeout=dict(type='int', default=10),
            max_workers=dict(type='int', default=16),
            busy_retries=dict(type='int', default=2),
            strict_link=dict(type='bool', default=False),
            strict_net_health=dict(type='bool', default=True),
        ),
        mutually_exclusive=[('devices', 'device_count')],
        required_one_of=[('devices', 'device_count')],
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, devices=[], summary={}, failures=[], check_warnings=[])

    try:
        device_ids = resolve_devices(p['devices'], p['device_count'])
        peers = normalize_peers(p['peers'], device_ids)
    except ValueError as exc:
        module.fail_json(msg='%s. Fix the task arguments.' % exc, **result)
    if p['ping_count'] < 1 or p['timeout'] < 1 or p['max_workers'] < 1 or p['busy_retries'] < 0:
        module.fail_json(msg='ping_count, timeout and max_workers must be at least 1 and busy_retries at '
                             'least 0 (got %s, %s, %s, %s)'
                             % (p['ping_count'], p['timeout'], p['max_workers'], p['busy_retries']), **result)

    tool = module.get_bin_path(p['hccn_tool_path'], opt_dirs=SEARCH_DIRS)
    if not tool:
        module.fail_json(
            msg="hccn_tool not found: %r is not an executable file and is not on PATH or in %s. Install the "
                "Ascend driver tools on this host, or set hccn_tool_path to the full path of hccn_tool "
                "(usually /usr/local/Ascend/driver/tools/hccn_tool)."
                % (p['hccn_tool_path'], ', '.join(SEARCH_DIRS)), **result)
    result['hccn_tool'] = tool

    report = run_checks(device_ids, subprocess_runner, peers, p['ping_count'], dict(
        tool=tool, checks=p['checks'], timeout=p['timeout'], max_workers=p['max_workers'],
        busy_retries=p['busy_retries'], strict_link=p['strict_link'],
        strict_net_health=p['strict_net_health']))

    result.update(devices=report['devices'], summary=report['summary'], failures=report['failures'],
                  check_warnings=report['warnings'])
    if 'tls' in p['checks']:
        result['tls'] = _str_keys(report['tls'])
    if 'vnic' in p['checks']:
        result['vnic_ips'] = _str_keys(report['vnic_ips'])
    for line in summarize_warnings(report['warnings']):
        module.warn(line)

    if report['failures']:
        module.fail_json(msg=failure_message(report['failures']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
