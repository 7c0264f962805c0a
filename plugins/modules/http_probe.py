#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: http_probe
short_description: GET a list of URLs in one call and report each status
description:
  - Sends one GET to every URL, concurrently, and returns each URL's status. One module call for a list that a
    loop of M(ansible.builtin.uri) tasks would take one round trip per URL for.
  - Fails only when O(fail) is true and a URL did not answer 200; the message lists those URLs and errors.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  urls:
    description: URLs to GET.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds each request may take.
    type: int
    default: 10
  fail:
    description: Fail when a URL does not answer 200.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Read-only; it probes in check mode too.
  diff_mode:
    support: none
    description: Nothing to diff.
"""

EXAMPLES = r"""
- name: Probe every rank's /health and /metrics
  ascend.vllm_pd.http_probe:
    urls: [http://127.0.0.1:9000/health, http://127.0.0.1:9000/metrics]
    fail: true
"""

RETURN = r"""
results:
  description: One entry per URL, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    url:
      description: The URL.
      type: str
    status:
      description: The HTTP status; null when there was no answer.
      type: int
    ok:
      description: Whether the status is 200.
      type: bool
    error:
      description: Why it is not ok (empty when ok).
      type: str
failing:
  description: "The URLs that did not answer 200, each as C(<url>: <error>)."
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._http_probe import failing, probe_all


def main():
    module = AnsibleModule(
        argument_spec=dict(
            urls=dict(type="list", elements="str", required=True),
            timeout=dict(type="int", default=10),
            fail=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    results = probe_all(module.params["urls"], module.params["timeout"])
    bad = failing(results)
    if bad and module.params["fail"]:
        module.fail_json(msg="not answering 200: " + "; ".join(bad), results=results, failing=bad)
    module.exit_json(changed=False, results=results, failing=bad)


if __name__ == "__main__":
    main()
