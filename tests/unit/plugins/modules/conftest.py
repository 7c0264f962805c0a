# -*- coding: utf-8 -*-
"""What the modules' tests share: running a module's main() in this process with its arguments, as Ansible would."""
from __future__ import annotations

import json

import pytest


def module_args(args):
    """The patch that hands main() its arguments: ansible-core's own helper (2.19), else the raw _ANSIBLE_ARGS."""
    try:
        from ansible.module_utils.testing import patch_module_args
        return patch_module_args(args)
    except ImportError:  # ansible-core 2.18
        from unittest import mock
        from ansible.module_utils import basic
        return mock.patch.object(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode())


@pytest.fixture
def run_main(capsys):
    """``run_main(module.main, {...}, check_mode=False)`` -> (the JSON main() printed, its exit status)."""
    def call(main, args, check_mode=False):
        params = dict(args, _ansible_check_mode=check_mode)
        with module_args(params), pytest.raises(SystemExit) as exited:
            main()
        return json.loads(capsys.readouterr().out), exited.value.code
    return call
