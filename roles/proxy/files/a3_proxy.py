#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy): an honest front for vllm-ascend's proxy.
"""a3_proxy.py: the honest wrapper around vllm-ascend's load_balance_proxy_server_example.py.

The wrapper is the package a3proxy next to this file (see its __init__ for what each module does); the
upstream script is imported from the same directory and stays the engine of the proxy.

Usage: python a3_proxy.py <the upstream's options> [--a3-... options]   (see --help)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from a3proxy.main import main  # noqa: E402  (after the path of the package)

if __name__ == "__main__":
    sys.exit(main())
