#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.vllm_pd contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: npu_smi_info
short_description: Read C(npu-smi info) and check NPU chip health and HBM use
description:
  - Runs C(npu-smi info) on the target, parses its chip table and process table and returns them as the
    C(npu_smi) fact (version, one record per chip, one record per NPU process).
  - With O(required_chips) set, the module fails when fewer chips than that report health C(OK), and when
    any chip reports another health (C(Warning), C(Alarm), C(Critical), ...), naming the chip's Phy-ID.
  - HBM held by processes whose PID is not in O(own_pids), or HBM used beyond O(hbm_used_limit_mb) on a
    chip with no process listed, is reported according to O(hbm_in_use).
  - The module only reads; it runs the same way in check mode and never reports a change.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
requirements:
  - C(npu-smi) from the Ascend driver on the target.
options:
  npu_smi_path:
    description:
      - Name or path of the C(npu-smi) binary. A bare name is looked up in E(PATH), C(/usr/local/bin),
        C(/usr/local/sbin) and C(/usr/local/Ascend/driver/tools).
    type: str
    default: npu-smi
  timeout:
    description:
      - Seconds C(npu-smi info) may take before the module gives up.
    type: int
    default: 30
  required_chips:
    description:
      - Number of chips that must report health C(OK) (16 on an Atlas 800 A3).
      - When set, the chips are evaluated and the module fails on every problem found. When unset, the
        module only gathers facts; O(hbm_in_use) findings are still returned.
    type: int
  own_pids:
    description:
      - PIDs (as C(npu-smi) shows them) of processes that belong to this deployment, for example a running
        vLLM instance being re-checked. HBM they hold is not reported.
    type: list
    elements: int
    default: []
  hbm_in_use:
    description:
      - What to do when another process holds HBM on a chip.
      - V(warn) reports it in RV(check_warnings) and as a warning, V(fail) fails the module (only when
        O(required_chips) is set), V(ignore) skips the check.
    type: str
    choices: [warn, fail, ignore]
    default: warn
  hbm_used_limit_mb:
    description:
      - HBM (MB) an idle chip may use with no process listed (the driver itself takes about 3.5 GB on an
        A3 chip). Above it the chip counts as in use, handled by O(hbm_in_use).
      - Set to V(0) to disable this part of the check.
    type: int
    default: 8192
extends_documentation_fragment:
  - ascend.vllm_pd.attributes
  - ascend.vllm_pd.attributes.facts
notes:
  - Chips are identified by their Phy-ID, the id C(hccn_tool -i) takes (0-15 on an A3, two chips per card).
    Older boards print no Phy-ID; their chips have RV(ansible_facts.npu_smi.chips[].phy_id=null).
  - On failure Ansible does not store facts; the same data is also returned as RV(npu_smi), so a
    registered result keeps it.
seealso:
  - module: ascend.vllm_pd.hccn_check
'''

EXAMPLES = r'''
- name: Gather NPU facts only
  ascend.vllm_pd.npu_smi_info:

- name: Require 16 healthy chips and no foreign HBM use
  ascend.vllm_pd.npu_smi_info:
    required_chips: 16
    hbm_in_use: fail

- name: Re-check a node where our own vLLM runs (PIDs from a previous task)
  ascend.vllm_pd.npu_smi_info:
    required_chips: 16
    own_pids: "{{ vllm_pids | default([]) }}"
  register: npu

- name: Show the Phy-IDs that are healthy
  ansible.builtin.debug:
    msg: "{{ ansible_facts['npu_smi']['chips'] | selectattr('health', 'eq', 'OK') | map(attribute='phy_id') }}"
'''

RETURN = r'''
ansible_facts:
  description: Facts added to the host.
  returned: success
  type: dict
  contains:
    npu_smi:
      description: What C(npu-smi info) printed, parsed.
      returned: success
      type: dict
      contains:
        version:
          description: The npu-smi/driver version from the table header.
          type: str
          sample: 24.1.rc3.7
        chips:
          description: One record per chip.
          type: list
          elements: dict
          contains:
            npu:
              description: Card id (the C(NPU) column).
              type: int
            chip:
              description: Chip index on the card.
              type: int
            phy_id:
              description: Phy-ID, the id C(hccn_tool -i) takes; null when the table has none.
              type: int
            name:
              description: Chip name.
              type: str
              sample: Ascend910
            health:
              description: Health as printed (C(OK), C(Warning), C(Alarm), C(Critical), ...).
              type: str
            power_w:
              description: Power draw in W; null when printed as C(-) or C(NA).
              type: float
            temp_c:
              description: Temperature in C.
              type: int
            hugepages_used:
              description: Huge pages used.
              type: int
            hugepages_total:
              description: Huge pages total.
              type: int
            aicore_pct:
              description: AI Core usage in percent.
              type: int
            memory_used_mb:
              description: Device DDR used (MB).
              type: int
            memory_total_mb:
              description: Device DDR total (MB).
              type: int
            hbm_used_mb:
              description: HBM used (MB).
              type: int
            hbm_total_mb:
              description: HBM total (MB).
              type: int
            bus_id:
              description: PCIe bus id.
              type: str
              sample: "0000:9D:00.0"
        processes:
          description: One record per process holding NPU memory.
          type: list
          elements: dict
          contains:
            npu:
              description: Card id.
              type: int
            chip:
              description: Chip index on the card.
              type: int
            pid:
              description: Process id.
              type: int
            name:
              description: Process name.
              type: str
            memory_mb:
              description: Memory the process holds (MB).
              type: int
npu_smi:
  description: Same content as RV(ansible_facts.npu_smi), also returned when the module fails.
  returned: when the output could be parsed
  type: dict
failures:
  description: Problems that fail the module (only evaluated with O(required_chips)).
  returned: always
  type: list
  elements: dict
  sample:
    - check: health
      npu: 1
      chip: 1
      phy_id: 3
      msg: phy-id 3 (NPU 1 chip 1) health is Alarm, expected OK
check_warnings:
  description: Advisory findings (HBM in use with O(hbm_in_use=warn)); also emitted as warnings.
  returned: always
  type: list
  elements: dict
  sample:
    - check: hbm_in_use
      npu: 0
      chip: 0
      phy_id: 0
      pid: 1234
      msg: "phy-id 0 (NPU 0 chip 0): process 1234 (python3) holds 30000 MB of HBM"
parse_warnings:
  description: Lines of the output the parser could not read (kept, not fatal).
  returned: always
  type: list
  elements: str
healthy_chips:
  description: Number of chips with health C(OK).
  returned: when the output could be parsed
  type: int
  sample: 16
command:
  description: The command that was run.
  returned: always
  type: str
  sample: /usr/local/bin/npu-smi info
rc:
  description: Exit code of the command.
  returned: when it ran
  type: int
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._hccn import (
    ToolTimeout,
    quote_argv,
    subprocess_runner,
)
from ansible_collections.ascend.vllm_pd.plugins.module_utils._npu_smi import (
    HBM_POLICIES,
    NpuSmiParseError,
    evaluate_chips,
    parse_npu_smi_info,
)

SEARCH_DIRS = ['/usr/local/bin', '/usr/local/sbin', '/usr/local/Ascend/driver/tools']


def main():
    module = AnsibleModule(
        argument_spec=dict(
            npu_smi_path=dict(type='str', default='npu-smi'),
            timeout=dict(type='int', default=30),
            required_chips=dict(type='int'),
            own_pids=dict(type='list', elements='int', default=[]),
            hbm_in_use=dict(type='str', choices=list(HBM_POLICIES), default='warn'),
            hbm_used_limit_mb=dict(type='int', default=8192),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, failures=[], check_warnings=[], parse_warnings=[], command='')

    binary = module.get_bin_path(p['npu_smi_path'], opt_dirs=SEARCH_DIRS)
    if not binary:
        module.fail_json(
            msg="npu-smi not found: %r is not an executable file and is not on PATH or in %s. Install the "
                "Ascend driver on this host, or set npu_smi_path to the full path of npu-smi."
                % (p['npu_smi_path'], ', '.join(SEARCH_DIRS)), **result)
    argv = [binary, 'info']
    result['command'] = quote_argv(argv)
    try:
        rc, out, err = subprocess_runner(argv, p['timeout'])
    except ToolTimeout:
        module.fail_json(
            msg='%s did not answer within %ss; the driver may be hung (check dmesg, or raise timeout)'
                % (result['command'], p['timeout']), **result)
    except OSError as exc:
        module.fail_json(msg='cannot run %s: %s. Check that npu_smi_path points to npu-smi and that it is '
                             'executable by the connecting user.' % (result['command'], exc), **result)
    result['rc'] = rc

    try:
        parsed = parse_npu_smi_info(out)
    except NpuSmiParseError as exc:
        module.fail_json(
            msg='%s (exit %s) printed no chip table: %s%s. Check that the driver is loaded (npu-smi info '
                'by hand on the host) and that this user may use the NPUs.'
                % (result['command'], rc, exc,
                   ('; stderr: ' + err.strip().splitlines()[-1][:300]) if err.strip() else ''),
            stdout=out, stderr=err, **result)
    except Exception as exc:  # pylint: disable=broad-except  # a message, never a traceback
        module.fail_json(
            msg='could not read the output of %s (%s: %s); this is a parser bug, please report it with '
                'the stdout returned here' % (result['command'], type(exc).__name__, exc),
            stdout=out, stderr=err, **result)
    result['parse_warnings'] = parsed.pop('warnings')
    for line in result['parse_warnings'][:5]:
        module.warn('npu-smi output: %s' % line)
    if rc != 0:
        module.warn('%s exited %s but printed a chip table; using it' % (result['command'], rc))

    facts = dict(version=parsed['version'], chips=parsed['chips'], processes=parsed['processes'])
    result['npu_smi'] = facts
    result['ansible_facts'] = dict(npu_smi=facts)
    result['healthy_chips'] = len([c for c in parsed['chips'] if c.get('health') == 'OK'])

    failures, warnings = evaluate_chips(
        parsed['chips'], p['required_chips'], parsed['processes'], own_pids=p['own_pids'],
        hbm_in_use_policy=p['hbm_in_use'], hbm_used_limit_mb=p['hbm_used_limit_mb'] or None)
    if p['required_chips'] is None:
        # facts only: health findings are reported, never fatal
        warnings = failures + warnings
        failures = []
    result['failures'] = failures
    result['check_warnings'] = warnings
    for item in warnings:
        module.warn(item['msg'])

    if failures:
        module.fail_json(
            msg='%d NPU chip check(s) failed: %s. Run %s by hand on this host; a chip not OK needs the '
                'driver/hardware fixed (npu-smi info -t health -i <npu>), foreign HBM use needs that '
                'process stopped or own_pids/hbm_in_use adjusted.'
                % (len(failures), '; '.join(f['msg'] for f in failures), result['command']),
            **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
