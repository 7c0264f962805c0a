#!/usr/bin/env bash
# All tests: static checks, unit/golden/validation tests, the simulation's own tests and the molecule
# scenarios on the simulated A3 cluster. Installs and starts what it needs (./setup.sh, sim/cluster.sh).
#   ./test.sh            everything
#   ./test.sh fast       no simulated cluster (static + unit + golden + validation + alert rules + ansible-test sanity +
#                        the installed tarball's render + Galaxy's import + the docs site in Chromium)
#   ./test.sh mutants [--sample N] [--module TEXT] [--tests PATH] [--survivors] [--fresh]
#                        mutation testing of the decision logic (tests/mutation.py): the score per module
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-all}
./setup.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_NOCOLOR=1 PY_COLORS=0
export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python   # etcd3 0.12 with protobuf >= 4 (requirements.txt)
step() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
# tests/unit/proxy/test_proxy_router_live.py runs the wrapper as vllm-router's parent and registrar in front of the
# real router: the pin proxy_router_package ships (roles/proxy/defaults), in a venv of this machine's test cache.
# Exported: the unit tests and the mutation runs (which run them) both need it.
. tests/cache_venv.sh
router_pin=$(sed -n 's/^proxy_router_package: *\([^ #]*\).*/\1/p' roles/proxy/defaults/main.yml)
cache_venv router-venv "$router_pin" "$router_pin"
export A3_ROUTER_BIN=$CACHE_VENV/bin/vllm-router
if [ "$mode" = mutants ]; then shift; exec python tests/mutation.py "$@"; fi

step "yamllint";         yamllint -s .
# ansible-lint keeps its cache (and an install of this collection) in ANSIBLE_HOME: a project-local one,
# so a copy of the collection in ~/.ansible/collections cannot shadow the checkout.
step "ansible-lint";     ANSIBLE_HOME="$PWD/.cache/ansible-lint-home" ansible-lint --offline -q
step "collection build"; ansible-galaxy collection build --force --output-path .cache/build >/dev/null && ls .cache/build
step "unit, golden, validation, lint and alert-rule tests"
# promtool (Debian's prometheus package) runs the alert rules' unit tests; tests/monitoring fails without it.
# policy-rc.d keeps the package's maintainer scripts from starting a Prometheus daemon on this machine.
if ! command -v promtool >/dev/null; then
  own_policy=0
  [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1; }
  rc=0
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; } >/dev/null || rc=$?
  [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { echo "test.sh: promtool is missing and apt-get install prometheus failed" >&2; exit 1; }
fi
# tests/unit/proxy/test_proxy_live.py runs the proxy wrapper live (its process, both uvicorn listeners, the prober and
# the forwarding to stub engines on 127.0.0.1, with a stand-in for the upstream script) on the web stack
# requirements.txt pins (fastapi, httpx, uvicorn); no proxy test skips: a missing package fails it, naming ./setup.sh.
pytest -q -p no:cacheprovider tests/unit tests/golden tests/validation tests/lint tests/monitoring tests/sim/test_tools.py tests/sim/test_partition.py \
  tests/sim/test_loadgen.py
step "ansible-test sanity (offline; tests/sanity.sh)"
tests/sanity.sh
step "collection tarball: members, install into an empty path, render from it"
pytest -q -p no:cacheprovider tests/collection
step "Galaxy's import of the tarball (galaxy-importer, ansible-lint on; tests/galaxy_import.sh)"
tests/galaxy_import.sh
step "docs site: antsibull-docs lint and build, every role and module page checked in headless Chromium"
tests/docs/site.sh
[ "$mode" = fast ] && exit 0

step "mutation testing: a seeded sample of the decision modules' mutants (./test.sh mutants runs them all)"
# Fails when the sample's score is below 90 %; the fixed seed makes a run repeatable. A fresh work tree, so the
# record of which test reaches which function is never one an older test suite left (and its own, so the cached
# results of a full ./test.sh mutants stay).
A3_MUTATION_WORK=.cache/mutation-sample python tests/mutation.py --fresh --sample "${A3_MUTATION_SAMPLE:-400}"

step "simulated cluster: images, the simulation's own tests"
sim/cluster.sh build   # installs and starts what it needs (deps) first
sim/cluster.sh up      # the live tests of test_cluster.py need the nodes (molecule recreates them after)
# The engine simulator's tests run the real proxy and real yuanrong workers: a venv with the proxy's
# dependencies and the datasystem wheel (the one the cluster build downloaded), and the unpacked sdist.
# test_honest_proxy.py runs the wrapper around the real upstream script of that sdist (and checks that the fast
# suite's stand-in keeps its interface); it fails, never skips, without them.
. sim/.cache/artifacts.env
if [ ! -x .cache/engine-venv/bin/dscli ] || ! .cache/engine-venv/bin/python -c 'import prometheus_client' 2>/dev/null; then
  python3 -m venv .cache/engine-venv
  .cache/engine-venv/bin/pip install -q fastapi==0.123.10 httpx==0.29.0 uvicorn==0.55.0 pytest==9.2.0 \
    "$(grep -E '^prometheus_client==' requirements.txt)" "$A3SIM_YUANRONG_WHEEL" \
    2> >(grep -v "is ignored: it is neither" >&2)
fi
if [ ! -d .cache/vllm-ascend-src/vllm_ascend ]; then
  mkdir -p .cache/vllm-ascend-src
  tar -C .cache/vllm-ascend-src --strip-components=1 -xzf "$A3SIM_VLLM_ASCEND_SDIST"
fi
A3SIM_ENGINE_PYTHON=$PWD/.cache/engine-venv/bin/python A3SIM_DSCLI=$PWD/.cache/engine-venv/bin/dscli \
VLLM_ASCEND_SRC=$PWD/.cache/vllm-ascend-src \
  .cache/engine-venv/bin/python -m pytest -q -p no:cacheprovider tests/sim/test_engine.py tests/sim/test_honest_proxy.py \
  tests/sim/test_cluster.py
# The proxy role's keepalived configuration run by the real keepalived in two network namespaces of its own
# (proxy_vip; keepalived comes with the deps above).
pytest -q -p no:cacheprovider tests/sim/test_keepalived_vip.py
# The nodes in network namespaces of their own (A3SIM_NET=netns, sim/lib/net.sh), then back in the default mode.
pytest -q -p no:cacheprovider tests/sim/test_netns.py

step "molecule: the four-node simulated cluster (converge, idempotence, check mode, verify) and its faults"
# default leaves its cluster up for selfheal (faults under load, no repair), which leaves it up for rolling
# (the GLM-5 layout in independent groups, a rolling restart under load), which destroys it.
for scenario in default selfheal rolling preflight_faults vnic_down hccn_not_mounted; do
  step "molecule test -s $scenario"
  molecule test -s "$scenario"
done
