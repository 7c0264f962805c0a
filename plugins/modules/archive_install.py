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
  - With O(src) the action plugin checks the controller's archive against O(checksum) before sending it (a wrong
    archive fails without a transfer), sends it to the node's temporary directory and removes it afterwards.
version_added: 0.2.0
author:
  - ascend.vllm_pd contributors (@ascend)
options:
  src:
    description: Archive on the controller (an air-gapped site's copy of the release archive).
    type: path
  archive:
    description: Archive already on the node (downloaded by M(ansible.builtin.get_url)). Exactly one of O(src) and
      O(archive).
    type: path
  checksum:
    description: C(sha256:<hex>) of the archive; empty checks nothing (M(ansible.builtin.get_url) checked it).
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
"""

RETURN = r"""
changed_paths:
  description: Installed paths whose content or mode changed (or would, in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import (
    ArchiveError, check_checksum, member_files, read_members)
from ansible_collections.ascend.vllm_pd.plugins.module_utils._files import apply, parse_mode


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path"},
            "archive": {"type": "path"},
            "checksum": {"type": "str", "default": ""},
            "checksum_name": {"type": "str", "default": "the pinned checksum"},
            "members": {"type": "list", "elements": "dict", "required": True, "options": {
                "name": {"type": "str", "required": True},
                "dest": {"type": "path", "required": True},
                "mode": {"type": "str", "required": True},
            }},
        },
        required_one_of=[("src", "archive")],
        mutually_exclusive=[("src", "archive")],
        supports_check_mode=True,
    )
    p = module.params
    if p["archive"] is None:
        module.fail_json(msg="src %s is sent by the action plugin (ascend.vllm_pd.archive_install), which passes "
                             "the node's copy as archive" % p["src"])
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
