#!/usr/bin/env bash
# Regenerate the golden render of inventories/a3 (review the git diff before committing it).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf tests/golden/a3
.venv/bin/ansible-playbook playbooks/render.yml -i inventories/a3 -e render_dir="$PWD/tests/golden/a3" >/dev/null
git status --short tests/golden/a3
