# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ascend.vllm_pd.archive_install, the one implementation of a release archive's install that the
etcd and monitoring (Prometheus) roles share. The archive comes from one of three places:

- url: downloaded to the node's download_dir (created 0755 when missing) by ansible.builtin.get_url, checked there
  against checksum (get_url skips a download whose file already matches), download_retries more attempts
  download_delay seconds apart, as an until loop would; then installed from that copy;
- src: an archive on the controller, checked against checksum on the controller (a wrong archive fails before any
  transfer), sent to the node's temporary directory and installed from there;
- archive: an archive already on the node, checked and installed by the module as it is.

The install itself is the module's (plugins/modules/archive_install.py): only the binaries whose bytes or mode
differ are replaced. changed says a binary was (or, in check mode, would be) replaced, as the roles' restarts
read it; the download's own change is in download.changed."""
from __future__ import annotations

import posixpath
import time
from urllib.parse import urlsplit

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.ascend.vllm_pd.plugins.module_utils._archive import ArchiveError, check_checksum

display = Display()

MODULE = "ascend.vllm_pd.archive_install"
DOWNLOAD_DIR = "/var/cache/ascend-vllm-pd"
DOWNLOAD_RETRIES = 3   # as the download tasks' retries: 3, delay: 5 (until: ... is succeeded) before
DOWNLOAD_DELAY = 5
SOURCES = ("src", "url", "archive")


def _count(args: dict, name: str, default: int) -> int:
    value = args.pop(name, None)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise AnsibleActionFail("%s must be a whole number of %s, not %r"
                                % (name, "seconds" if name.endswith("delay") else "retries", value))
    if number < 0:
        raise AnsibleActionFail("%s must be at least 0, not %d" % (name, number))
    return number


def archive_path(url: str, directory: str) -> str:
    """Where a download of ``url`` is kept on the node: the URL's file name in ``directory``."""
    name = posixpath.basename(urlsplit(url).path)
    if not name:
        raise AnsibleActionFail("url %s names no file (it must end with the archive's name)" % url)
    return posixpath.join(directory, name)


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        src = args.pop("src", None)
        url = args.pop("url", None)
        download_dir = args.pop("download_dir", None) or DOWNLOAD_DIR
        retries = _count(args, "download_retries", DOWNLOAD_RETRIES)
        delay = _count(args, "download_delay", DOWNLOAD_DELAY)
        given = [name for name, value in zip(SOURCES, (src, url, args.get("archive"))) if value]
        if len(given) > 1:
            raise AnsibleActionFail("give one of src (an archive on the controller), url (one to download on the node) "
                                    "or archive (one on the node), not %s" % " and ".join(given))
        if src:
            return self._install_sent(result, src, args, task_vars)
        if url:
            download = self._download(url, download_dir, args.get("checksum") or "", retries, delay, task_vars)
            result["download"] = download
            if download.get("failed"):
                result.update(failed=True, changed=False, msg="download of %s failed after %d attempt(s): %s"
                              % (url, download.get("attempts", 1), download.get("msg", "no message")))
                return result
            # get_url checked the download against the pin (a sha256 or the release's checksum file)
            args.update(archive=download["dest"], checksum="")
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result

    def _install_sent(self, result, src, args, task_vars):
        """Check the controller's archive against the pin, send it to the node's temporary directory, install."""
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
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _download(self, url, directory, checksum, retries, delay, task_vars):
        """The node's copy of ``url`` in ``directory``: get_url's result, with attempts (and changed when the
        directory had to be made)."""
        dest = archive_path(url, directory)
        made = self._execute_module(module_name="ansible.builtin.file", task_vars=task_vars,
                                    module_args={"path": directory, "state": "directory", "mode": "0755"})
        if made.get("failed"):
            return dict(made, attempts=1, msg="cannot make the download directory %s: %s" % (directory, made.get("msg")))
        fetch = {"url": url, "dest": dest, "checksum": checksum, "mode": "0644"}
        attempt = 0
        while True:
            attempt += 1
            got = self._execute_module(module_name="ansible.builtin.get_url", module_args=fetch, task_vars=task_vars)
            if not got.get("failed") or attempt > retries:
                break
            display.display("FAILED - RETRYING: [%s]: download of %s (%d retries left): %s"
                            % ((task_vars or {}).get("inventory_hostname", "?"), url, retries - attempt + 1,
                               got.get("msg", "")))
            time.sleep(delay)
        got.pop("invocation", None)
        got.update(attempts=attempt, dest=dest, changed=bool(got.get("changed") or made.get("changed")))
        return got
