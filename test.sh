#!/usr/bin/env bash
# All tests: static checks, unit/golden/validation tests, the simulation's own tests and the molecule
# scenarios on the simulated A3 cluster. Installs and starts what it needs (./setup.sh, sim/cluster.sh).
#   ./test.sh            everything
#   ./test.sh fast       no simulated cluster (static + unit + golden + validation)
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-all}
./setup.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_NOCOLOR=1 PY_COLORS=0
export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python   # etcd3 0.12 with protobuf >= 4 (requirements.txt)
step() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

step "yamllint";         yamllint -s .
step "ansible-lint";     ansible-lint --offline -q
step "collection build"; ansible-galaxy collection build --force --output-path .cache/build >/dev/null && ls .cache/build
step "unit, golden, validation and lint tests"
pytest -q -p no:cacheprovider tests/unit tests/golden tests/validation tests/lint tests/sim/test_tools.py
[ "$mode" = fast ] && exit 0

step "simulated cluster: images and engine tests"
sim/cluster.sh deps build
pytest -q -p no:cacheprovider tests/sim/test_engine.py
