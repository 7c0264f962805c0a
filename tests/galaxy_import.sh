#!/usr/bin/env bash
# Galaxy's own import check of the built tarball: galaxy-importer (PyPI) with ansible-lint on, ansible-test off,
# offline. Fails on any ERROR or WARNING line of the import, and unless the import completes.
#   tests/galaxy_import.sh
# The tarball is built by hacking/build_collection.py with the repository URL a publisher supplies
# ($A3_COLLECTION_REPOSITORY; CI supplies a reserved example URL, since the real one is the publisher's).
# The importer's venv lives in this machine's test cache (tests/cache_venv.sh), rebuilt when the pin changes. The collections the roles call (galaxy.yml dependencies) come from the pinned
# "ansible" package of .venv, as a Galaxy server has them installed: without them every task of theirs is a warning
# about the importer's environment, not about this collection.
set -euo pipefail
cd "$(dirname "$0")/.."
pin="galaxy-importer==0.4.44"
. tests/cache_venv.sh
cache_venv importer-venv "$pin" "$pin"
venv=$CACHE_VENV
repository=${A3_COLLECTION_REPOSITORY:-https://example.invalid/ascend/vllm_pd}
out=.cache/galaxy-import
rm -rf "$out"
mkdir -p "$out"
tarball=$(.venv/bin/python hacking/build_collection.py --repository "$repository" --output-path "$out" \
          --ansible-galaxy .venv/bin/ansible-galaxy)
# The dependencies of galaxy.yml, linked into the importer venv's site-packages, where ansible-core finds collections
# whatever ANSIBLE_COLLECTIONS_PATH the importer sets.
deps=$(echo "$PWD"/.venv/lib/python3*/site-packages/ansible_collections)
site=$(echo "$venv"/lib/python3*/site-packages)
for dep in $(.venv/bin/python -c 'import yaml; print(" ".join(yaml.safe_load(open("galaxy.yml"))["dependencies"]))'); do
  [ -d "$deps/${dep/.//}" ] || { echo "galaxy_import: $dep is not in $deps (./setup.sh installs it)" >&2; exit 1; }
  mkdir -p "$site/ansible_collections/${dep%%.*}"
  ln -sfn "$deps/${dep/.//}" "$site/ansible_collections/${dep/.//}"
done
log=$out/import.log
rc=0
# cd: the importer's ansible-lint looks for roles next to the working directory, and must find none of the checkout's
(cd "$out" && env PATH="$venv/bin:$PATH" HOME="$PWD" \
   GALAXY_IMPORTER_RUN_ANSIBLE_TEST=false GALAXY_IMPORTER_RUN_ANSIBLE_LINT=true GALAXY_IMPORTER_OFFLINE_ANSIBLE_LINT=true \
   python -m galaxy_importer.main "$(basename "$tarball")") > "$log" 2>&1 || rc=$?
problems=$(grep -E '^(WARNING|ERROR)' "$log" || true)
if [ "$rc" != 0 ] || [ -n "$problems" ] || ! grep -q '^Importer processing completed successfully' "$log"; then
  echo "galaxy_import: the import of $(basename "$tarball") failed or warned (exit $rc; whole log: $log):" >&2
  echo "${problems:-$(tail -20 "$log")}" >&2
  exit 1
fi
echo "galaxy import of $(basename "$tarball"): no error, no warning ($(grep -c . "$log") lines in $log)"
