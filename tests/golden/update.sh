#!/usr/bin/env bash
# Regenerate the golden render of inventories/a3 (review the git diff before committing it).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf tests/golden/a3
.venv/bin/ansible-playbook playbooks/render.yml -i inventories/a3 -e render_dir="$PWD/tests/golden/a3" >/dev/null
# verbatim copies of role files are not repeated in the golden tree (test_golden.py COPIES)
find tests/golden/a3 \( -name a3_supervise.py -o -name a3_proxy.py -o -name ascend-vllm-pd-dashboard.json \) -delete
rm -rf tests/golden/a3/*/var/lib/ascend-vllm-pd/a3proxy
find tests/golden/a3 -type d -empty -delete
git status --short tests/golden/a3
