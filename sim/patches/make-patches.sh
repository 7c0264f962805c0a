#!/usr/bin/env bash
# Writes the simulation's stand-ins for the seed's (non-public) patch files into inventories/sim/files/patches,
# made with git format-patch against the trees the substitute image carries:
#   - vllm-ascend 0.18.0 (from the sdist): register a 'yuanrong' backend in backend_map and add its module,
#     then a follow-up that changes that module (so order and "already applied" detection are exercised);
#   - the vllm repository (the engine simulator): a new file recording the local_cache_hit fix.
# Usage: sim/patches/make-patches.sh [VLLM_ASCEND_SDIST_TREE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
out=$root/inventories/sim/files/patches
src=${1:-$(find "$root/sim/.cache" -maxdepth 3 -type d -name 'vllm_ascend-0.18.0' 2>/dev/null | head -n1)}
[ -d "$src/vllm_ascend" ] || { echo "usage: $0 /path/to/vllm_ascend-0.18.0 (unpacked sdist)" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export GIT_AUTHOR_NAME=deploy GIT_AUTHOR_EMAIL=deploy@local GIT_COMMITTER_NAME=deploy GIT_COMMITTER_EMAIL=deploy@local
export GIT_AUTHOR_DATE='2026-01-02T00:00:00+0000' GIT_COMMITTER_DATE='2026-01-02T00:00:00+0000'
mkdir -p "$out"

# vllm-ascend: the same one-commit repository as in the image.
cp -r "$src" "$work/vllm-ascend"; cd "$work/vllm-ascend"
git init -q -b main; git add -A; git commit -q -m 'vllm-ascend v0.18.0 sdist'
pw=vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/pool_worker.py
be=vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/backend/yuanrong_backend.py
python3 - "$pw" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = 'backend_map = {\n'
assert anchor in s
s = s.replace(anchor, anchor + '    "yuanrong": {\n        "name": "YuanrongBackend",\n'
              '        "path": "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.yuanrong_backend",\n'
              '    },\n', 1)
open(p, "w").write(s)
PY
cat > "$be" <<'PY'
# Simulation stand-in for the yuanrong backend (a3sim): the real one talks to the openYuanrong
# datasystem worker named by DS_WORKER_ADDR.
import os

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import Backend


class YuanrongBackend(Backend):
    def __init__(self, parallel_config):
        self.worker_addr = os.environ["DS_WORKER_ADDR"]
PY
git add -A; git commit -q -m 'Implement yuanrong backend'
git format-patch -1 --stdout > "$out/0001-Implement-yuanrong-backend.patch"
cat >> "$be" <<'PY'

    # Transfers above this many objects are split into batches.
    MAX_OBJECTS_PER_BATCH = 10000
PY
git commit -q -am 'fix kv pool: update yuanrong backend handling'
git format-patch -1 --stdout > "$out/0001-fix-kv-pool-update-yuanrong-backend-handling.patch"

# vllm: a new file, so it applies to any engine simulator tree.
mkdir -p "$work/vllm"; cd "$work/vllm"; git init -q -b main; echo sim > README; git add -A; git commit -q -m base
mkdir -p vllm_sim; printf 'local_cache_hit is clamped at 0 in P/D disaggregation (a3sim stand-in)\n' > vllm_sim/LOCAL_CACHE_HIT_FIX
git add -A; git commit -q -m '[Bugfix] Fix negative local_cache_hit in P/D disaggregation'
git format-patch -1 --stdout > "$out/0001-Bugfix-Fix-negative-local_cache_hit-in-P-D-disaggreg.patch"
ls -l "$out"
