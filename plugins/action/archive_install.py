# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ascend.vllm_pd.archive_install: with src, check the controller's archive against the pinned
checksum, send it to the node's temporary directory and install from there (see plugins/modules/archive_install.py);
with archive, run the module as it is."""
from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import ArchiveError, check_checksum


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        src = args.pop("src", None)
        if not src:
            result.update(self._execute_module(module_name="ascend.vllm_pd.archive_install", module_args=args,
                                               task_vars=task_vars))
            return result
        if args.get("archive"):
            raise AnsibleActionFail("give src (an archive on the controller) or archive (one on the node), not both")
        try:
            source = self._find_needle("files", src)
        except AnsibleError as e:
            raise AnsibleActionFail(to_text(e))
        try:
            check_checksum(source, args.get("checksum") or "", label=source,
                           pin_name=args.get("checksum_name") or "the pinned checksum")
        except (ArchiveError, OSError) as e:
            raise AnsibleActionFail(to_text(e))
        try:
            remote = self._connection._shell.join_path(self._connection._shell.tmpdir, "archive")
            self._transfer_file(source, remote)
            self._fixup_perms2((self._connection._shell.tmpdir, remote))
            # checked on the controller; the module reads the node's copy only
            args.update(archive=remote, checksum="")
            result.update(self._execute_module(module_name="ascend.vllm_pd.archive_install", module_args=args,
                                               task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
