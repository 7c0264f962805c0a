#!/usr/bin/env bash
# One-time set-up of the controller: a virtual environment in the checkout with the pinned Python
# packages and collections, and the checkout linked in as the collection ascend.vllm_pd.
# Idempotent: a rerun installs only what changed.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "setup.sh: Python >= 3.11 is needed for ansible-core 2.19 (found $("$PY" -V 2>&1))" >&2; exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install --quiet -r requirements.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  echo "$want" > "$stamp"
fi
# The checkout is the collection: link it where ansible.cfg's collections_path looks.
mkdir -p .venv/collections/ansible_collections/ascend
ln -sfn ../../../.. .venv/collections/ansible_collections/ascend/vllm_pd
# Check the collections of requirements.yml against what the pinned ansible package carries.
.venv/bin/python - <<'PY'
import json, pathlib, sys, yaml, ansible_collections
roots = [pathlib.Path(p) for p in ansible_collections.__path__]
bad = []
for c in yaml.safe_load(open("requirements.yml"))["collections"]:
    ns, name = c["name"].split(".")
    found = [json.load(open(r / ns / name / "MANIFEST.json"))["collection_info"]["version"]
             for r in roots if (r / ns / name / "MANIFEST.json").exists()]
    if str(c["version"]) not in found:
        bad.append("%s %s (found %s)" % (c["name"], c["version"], found or "none"))
if bad:
    sys.exit("setup.sh: collection versions differ from requirements.yml: " + ", ".join(bad))
PY
echo "setup.sh: ready (.venv; run '. .venv/bin/activate' or use .venv/bin/ansible-playbook)"
