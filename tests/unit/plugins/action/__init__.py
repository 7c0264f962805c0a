# -*- coding: utf-8 -*-
# A package: its test modules share basenames with tests/unit/plugins/module_utils (test_files, test_converge_state).
