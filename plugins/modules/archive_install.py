#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: archive_install
short_description: Install binaries from a release archive, replacing only those that differ
description:
  - Checks the archive against its pinned checksum, reads the named members and writes each one whose bytes or mode
    differ from the installed file (atomic renames), in one module call. Nothing else of the archive is extracted.
  - With O(url) the action plugin downloads the archive into O(download_dir) on the node with
    M(ansible.builtin.get_url), checked against O(checksum) (a file already there that matches is not downloaded
    again), retrying a failed download, and installs from that copy.
  - With O(src) the action plugin checks the controller's archive against O(checksum) before sending it (a wrong
    archive fails without a transfer), sends it to the node's temporary directory and removes it afterwards.
  - The etcd and monitoring (Prometheus) roles of the collection install their release binaries through it.
version_added: 1.0.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  src:
    description: Archive on the controller (an air-gapped site's copy of the release archive).
    type: path
  url:
    description: URL of the release archive, downloaded on the node into O(download_dir) under the URL's file name.
    type: str
  archive:
    description: Archive already on the node. Exactly one of O(src), O(url) and O(archive).
    type: path
  download_dir:
    description: Directory on the node that keeps the archives downloaded from O(url) (created C(0755) when missing).
    type: path
    default: /var/cache/ascend-vllm-pd
  download_retries:
    description: Attempts after a failed download from O(url), O(download_delay) seconds apart. At least 0.
    type: int
    default: 3
  download_delay:
    description: Seconds between two attempts of a download from O(url). At least 0.
    type: int
    default: 5
  checksum:
    description:
      - C(sha256:<hex>) of the archive; empty checks nothing.
      - With O(url), M(ansible.builtin.get_url) checks the download against it, so it may also be
        C(sha256:<URL of the release's checksum file>).
    type: str
    default: ""
  checksum_name:
    description: What pins O(checksum), named in the error when the archive does not match (a variable, so the
      operator knows what to correct).
    type: str
    default: the pinned checksum
  members:
    description: The binaries to install.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Path of the member inside the archive, e.g. C(etcd-v3.5.12-linux-amd64/etcd).
        type: str
        required: true
      dest:
        description: Where it is installed on the node.
        type: path
        required: true
      mode:
        description: Permissions, an octal string such as C("0755").
        type: str
        required: true
attributes:
  check_mode:
    support: full
    description: Reports which binaries would be replaced and writes nothing.
  diff_mode:
    support: full
    description: Binaries show as their size before and after.
"""

EXAMPLES = r"""
- name: Install etcd and etcdctl (replaced only when a binary differs)
  ascend.vllm_pd.archive_install:
    src: /srv/mirror/etcd-v3.5.12-linux-amd64.tar.gz
    checksum: sha256:f2ff0cb43ce119f55a85012255609b61c64263baea83aa7c8e6846c0938adca5
    checksum_name: etcd_checksums['v3.5.12']['amd64']
    members:
      - {name: etcd-v3.5.12-linux-amd64/etcd, dest: /usr/local/bin/etcd, mode: "0755"}
      - {name: etcd-v3.5.12-linux-amd64/etcdctl, dest: /usr/local/bin/etcdctl, mode: "0755"}
  notify: Restart etcd

- name: Download Prometheus into /var/cache/ascend-vllm-pd and install prometheus and promtool from it
  ascend.vllm_pd.archive_install:
    url: https://github.com/prometheus/prometheus/releases/download/v3.5.0/prometheus-3.5.0.linux-amd64.tar.gz
    checksum: sha256:https://github.com/prometheus/prometheus/releases/download/v3.5.0/sha256sums.txt
    checksum_name: monitoring_prometheus_checksum
    members:
      - {name: prometheus-3.5.0.linux-amd64/prometheus, dest: /usr/local/bin/prometheus, mode: "0755"}
      - {name: prometheus-3.5.0.linux-amd64/promtool, dest: /usr/local/bin/promtool, mode: "0755"}
  register: prometheus_binaries
"""

RETURN = r"""
changed_paths:
  description:
    - Installed paths whose content or mode changed (or would, in check mode).
    - C(changed) is true when this list is not empty; a download into O(download_dir) alone does not count.
  returned: always
  type: list
  elements: str
download:
  description: With O(url), the result of M(ansible.builtin.get_url), with C(attempts), C(dest) (the node's copy) and
    C(changed) (a download, or the directory made).
  returned: with O(url)
  type: dict
  sample: {changed: true, attempts: 1, dest: /var/cache/ascend-vllm-pd/etcd-v3.5.12-linux-amd64.tar.gz}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import (
    ArchiveError, check_checksum, member_files, read_members)
from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import apply, parse_mode


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path"},
            "url": {"type": "str"},
            "archive": {"type": "path"},
            "download_dir": {"type": "path", "default": "/var/cache/ascend-vllm-pd"},
            "download_retries": {"type": "int", "default": 3},
            "download_delay": {"type": "int", "default": 5},
            "checksum": {"type": "str", "default": ""},
            "checksum_name": {"type": "str", "default": "the pinned checksum"},
            "members": {"type": "list", "elements": "dict", "required": True, "options": {
                "name": {"type": "str", "required": True},
                "dest": {"type": "path", "required": True},
                "mode": {"type": "str", "required": True},
            }},
        },
        required_one_of=[("src", "url", "archive")],
        mutually_exclusive=[("src", "url", "archive")],
        supports_check_mode=True,
    )
    p = module.params
    if p["archive"] is None:
        given = "src %s is sent" % p["src"] if p["src"] else "url %s is downloaded" % p["url"]
        module.fail_json(msg="%s by the action plugin (ascend.vllm_pd.archive_install), which passes the node's copy "
                             "as archive" % given)
    try:
        members = [dict(m, mode=parse_mode(m["mode"])) for m in p["members"]]
        check_checksum(p["archive"], p["checksum"], pin_name=p["checksum_name"])
        contents = read_members(p["archive"], [m["name"] for m in members])
        result = apply(member_files(contents, members), check_mode=module.check_mode, want_diff=module._diff)
    except (ArchiveError, ValueError, OSError) as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
