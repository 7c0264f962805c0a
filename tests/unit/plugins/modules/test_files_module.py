# -*- coding: utf-8 -*-
"""The module ascend.vllm_pd.files run in this process (main() with its arguments as Ansible passes them): how a
failure of AnsibleModule.atomic_move, through which it writes every file, fails the task. What it writes is tested
in tests/unit/plugins/module_utils/test_files*.py."""
from __future__ import annotations

import errno
import functools
import os

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.vllm_pd.plugins.modules import files


@pytest.fixture
def run(run_main):
    return functools.partial(run_main, files.main)


def test_a_failed_fallback_copy_of_atomic_move_fails_the_task_with_its_cause(run, tmp_path, monkeypatch):
    # atomic_move raises a bare Exception, its OSError chained, when its copy within the directory fails
    def refuse(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as ex:
            raise Exception("Failed to replace %r with %r." % (dest, src)) from ex
    monkeypatch.setattr(AnsibleModule, "atomic_move", refuse)
    dest = tmp_path / "a.conf"
    out, code = run({"files": [{"dest": str(dest), "content": "a=1\n", "mode": "0644"}]})
    assert code == 1 and out["failed"] is True
    assert out["msg"].startswith("Failed to replace %r with '%s/.a.conf." % (str(dest), tmp_path))
    assert out["msg"].endswith(". ([Errno 28] No space left on device)")
    assert os.listdir(tmp_path) == []  # the temporary file is removed


def test_an_oserror_of_atomic_move_fails_the_task_as_it_is(run, tmp_path, monkeypatch):
    def refuse(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
        raise PermissionError(errno.EACCES, "Permission denied", dest)
    monkeypatch.setattr(AnsibleModule, "atomic_move", refuse)
    dest = tmp_path / "b"
    out, code = run({"files": [{"dest": str(dest), "content": "", "mode": "0600"}]})
    assert code == 1 and out["msg"] == "[Errno 13] Permission denied: %r" % str(dest)
    assert os.listdir(tmp_path) == []


def test_check_mode_does_not_move(run, tmp_path, monkeypatch):
    monkeypatch.setattr(AnsibleModule, "atomic_move", lambda *a, **k: pytest.fail("moved in check mode"))
    out, code = run({"files": [{"dest": str(tmp_path / "c"), "content": "x", "mode": "0644"}]}, check_mode=True)
    assert code == 0 and out["changed"] is True and out["changed_paths"] == [str(tmp_path / "c")]
    assert os.listdir(tmp_path) == []
