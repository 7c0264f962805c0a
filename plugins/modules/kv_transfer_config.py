#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: kv_transfer_config
short_description: Assemble vLLM's --kv-transfer-config JSON for the PD engine instances of a host
description:
  - Builds the MultiConnector config (MooncakeConnectorV1 for prefill-to-decode KV transfer plus
    AscendStoreConnector for the external KV pool) from the topology; with O(pool_enabled=false) a plain
    MooncakeConnectorV1 config without the pool.
  - Checks what vLLM skips under MultiConnector - the Mooncake prefill/decode blocks against this instance's own
    dp/tp, and prefill tp >= decode tp.
  - With O(instances) and O(work_dir) one call gives what the engines of a host read - the file of each instance,
    C(<work_dir>/kv_transfer_config_dp<dp_rank>.json), ready for M(ascend.vllm_pd.files) (RV(files)), and the same
    JSON by dp rank (RV(by_rank)); the instances differ only in their lookup_rpc_port. With O(lookup_rpc_port) it
    builds the config of one instance (RV(config), RV(json)).
  - "Pure computation; it changes nothing. Run it on the controller (C(delegate_to: localhost))."
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  side:
    description: Which side the instance serves.
    type: str
    required: true
    choices: [prefill, decode]
  kv_port:
    description: Mooncake base kv port of the side (instance dp_rank listens on kv_port + dp_rank x tp .. + tp - 1).
    type: int
    required: true
  mooncake:
    description: The C(prefill) and C(decode) blocks, each with C(dp_size) and C(tp_size).
    type: dict
    required: true
  dp_size:
    description: Data-parallel size of this instance's side.
    type: int
    required: true
  tp_size:
    description: Tensor-parallel size of this instance's side.
    type: int
    required: true
  lookup_rpc_port:
    description:
      - AscendStoreConnector lookup_rpc_port of one instance (suffix of a local IPC socket, unique per host).
      - Exactly one of O(lookup_rpc_port) and O(instances) is required.
    type: str
  instances:
    description:
      - The engine instances of the host (the topology fact's C(a3_self.instances)), each a dict with C(dp_rank)
        (a non-negative integer, unique on the host) and C(lookup_rpc_port) (unique on the host); other keys are
        ignored. RV(files) follows this order.
      - Requires O(work_dir).
    type: list
    elements: dict
  work_dir:
    description:
      - Absolute path of the host's work directory, where the launcher's C(run_dp_template.sh) reads
        C(kv_transfer_config_dp<dp_rank>.json). With O(instances) only.
    type: str
  engine_id:
    description: Top-level C(engine_id); omitted when null (the seed sets it on prefill only).
    type: str
  pool_backend:
    description: AscendStoreConnector backend.
    type: str
    default: yuanrong
  mooncake_extra:
    description:
      - Extra keys of the Mooncake connector's C(kv_connector_extra_config) (seed C(use_ascend_direct)).
      - C(prefill) and C(decode) come from O(mooncake) and may not be set here.
    type: dict
    default: {}
  mooncake_module_path:
    description: C(kv_connector_module_path) of the Mooncake connector; omitted when empty.
    type: str
  pool_extra:
    description:
      - Extra keys of the AscendStoreConnector's C(kv_connector_extra_config).
      - C(lookup_rpc_port) and C(backend) come from the instance's lookup_rpc_port and O(pool_backend) and may not
        be set here.
    type: dict
    default: {}
  pool_enabled:
    description:
      - With V(false) the AscendStoreConnector (KV pool) is left out and the config is a plain
        C(MooncakeConnectorV1) (vllm-ascend's PD guide form); O(pool_extra) must then be empty.
    type: bool
    default: true
  top_level_extra:
    description:
      - Extra top-level keys, e.g. C(kv_load_failure_policy) (read only at MultiConnector level).
      - C(kv_connector), C(kv_role), C(engine_id) and C(kv_connector_extra_config) are computed and may not be set here.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Pure computation.
  diff_mode:
    support: none
    description: Nothing to diff.
  idempotent:
    support: full
    description: Same input, same output.
"""

EXAMPLES = r"""
- name: Build the decode instance's kv-transfer-config
  ascend.vllm_pd.kv_transfer_config:
    side: decode
    kv_port: 30100
    mooncake: {prefill: {dp_size: 2, tp_size: 16}, decode: {dp_size: 2, tp_size: 16}}
    dp_size: 2
    tp_size: 16
    lookup_rpc_port: "1"
  delegate_to: localhost
  register: kv   # kv.json is the text for --kv-transfer-config

- name: Build the files of every prefill instance of this host in one call
  ascend.vllm_pd.kv_transfer_config:
    side: prefill
    kv_port: 30000
    mooncake: {prefill: {dp_size: 2, tp_size: 16}, decode: {dp_size: 2, tp_size: 16}}
    dp_size: 2
    tp_size: 16
    instances: "{{ a3_self.instances }}"   # e.g. [{dp_rank: 0, lookup_rpc_port: 0}, {dp_rank: 1, lookup_rpc_port: 1}]
    work_dir: /var/lib/ascend-vllm-pd
    engine_id: "0"
  delegate_to: localhost
  register: kv_files

- name: Write them
  ascend.vllm_pd.files:
    files: "{{ kv_files.files }}"   # /var/lib/ascend-vllm-pd/kv_transfer_config_dp0.json, ..._dp1.json
"""

RETURN = r"""
config:
  description: The config as a dict.
  returned: with O(lookup_rpc_port)
  type: dict
json:
  description: The config as compact JSON text, key order as built.
  returned: with O(lookup_rpc_port)
  type: str
files:
  description:
    - One file per O(instances) item, in that order, in the form M(ascend.vllm_pd.files) takes.
  returned: with O(instances)
  type: list
  elements: dict
  contains:
    dest:
      description: C(<work_dir>/kv_transfer_config_dp<dp_rank>.json).
      type: str
    content:
      description: The instance's config as compact JSON text (key order as built), then a newline.
      type: str
    mode:
      description: C(0644).
      type: str
  sample:
    - dest: /var/lib/ascend-vllm-pd/kv_transfer_config_dp0.json
      content: '{"kv_connector":"MultiConnector","kv_role":"kv_producer", ...}'
      mode: "0644"
by_rank:
  description: The config of each instance as compact JSON text (the content of its file without the newline),
    keyed by its dp rank as text.
  returned: with O(instances)
  type: dict
  sample: {"0": "{\"kv_connector\":\"MultiConnector\", ...}"}
notes:
  description: Advisory notes, e.g. a pool backend that needs the yuanrong patch on v0.18.0.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._kv_transfer import (
    KvConfigError, build, instance_files, notes, to_json)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            side=dict(type="str", required=True, choices=["prefill", "decode"]),
            kv_port=dict(type="int", required=True),
            mooncake=dict(type="dict", required=True),
            dp_size=dict(type="int", required=True),
            tp_size=dict(type="int", required=True),
            lookup_rpc_port=dict(type="str"),
            instances=dict(type="list", elements="dict"),
            work_dir=dict(type="str"),
            engine_id=dict(type="str"),
            pool_backend=dict(type="str", default="yuanrong"),
            mooncake_extra=dict(type="dict", default={}),
            mooncake_module_path=dict(type="str"),
            pool_extra=dict(type="dict", default={}),
            top_level_extra=dict(type="dict", default={}),
            pool_enabled=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("lookup_rpc_port", "instances")],
        required_one_of=[("lookup_rpc_port", "instances")],
        required_together=[("instances", "work_dir")],
        supports_check_mode=True,
    )
    p = module.params
    topology = dict((key, p[key]) for key in ("side", "kv_port", "mooncake", "dp_size", "tp_size"))
    options = dict((key, p[key]) for key in ("engine_id", "pool_backend", "mooncake_extra", "mooncake_module_path",
                                             "pool_extra", "top_level_extra", "pool_enabled"))
    try:
        if p["instances"] is not None:
            module.exit_json(changed=False, **instance_files(p["instances"], p["work_dir"], **dict(topology, **options)))
        config = build(lookup_rpc_port=p["lookup_rpc_port"], **dict(topology, **options))
    except KvConfigError as exc:
        module.fail_json(msg="invalid kv-transfer-config for the %s side: %s; fix the vllm_* variables in the "
                             "inventory" % (p["side"], exc))
    module.exit_json(changed=False, config=config, json=to_json(config), notes=notes(config))


if __name__ == "__main__":
    main()
