# -*- coding: utf-8 -*-
"""Stands in for the pip bootstrap script ansible-test downloads from its own file server (not a package
registry) into ~/.ansible/test/cache/get_pip_<version>.py before it fills the virtual environment of a
sanity test. tests/sanity.sh copies this file there, so nothing is downloaded from outside the package
registry: pip comes from the standard library's ensurepip (the wheel bundled with Python), which then
installs the pip version ansible-test asks for with the machine's own pip configuration.

ansible-test runs it as get-pip.py: the arguments are pip install arguments plus get-pip's own
--no-setuptools and --no-wheel (which only mean "do not install those" here)."""
from __future__ import annotations

import subprocess
import sys


def main() -> int:
    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    # A separate process: ensurepip sets PIP_CONFIG_FILE=/dev/null in its own environment, which would
    # hide the machine's pip configuration from the install below.
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], stdout=subprocess.DEVNULL)
    return subprocess.call([sys.executable, "-m", "pip", "install", "--quiet"] + args)


if __name__ == "__main__":
    sys.exit(main())
