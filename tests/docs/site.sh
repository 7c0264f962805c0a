#!/usr/bin/env bash
# The collection's HTML docs site, built as a Galaxy user would see it, and checked in a real headless browser.
#   tests/docs/site.sh
# 1. antsibull-docs lint-collection-docs --plugin-docs on the installed tarball (every module, plugin and role doc).
# 2. antsibull-docs sphinx-init + antsibull-docs collection + sphinx-build: the HTML site in .cache/docs-site/html.
#    Offline: the intersphinx inventories of docs.python.org and docs.ansible.com cannot be fetched, so references into
#    them (ansible.builtin modules, the "action plugins" and "common return values" pages) cannot resolve. Those are the
#    only warnings allowed (tests/docs/check_site.py names them); any other Sphinx warning fails the build.
# 3. Chromium (Debian's package, headless) loads every role's and every module's page: each must render its options
#    table with every option its spec declares. A screenshot of the index is kept as .cache/docs-site/index.png.
# The venv is in this machine's test cache (tests/cache_venv.sh), rebuilt when the pins change.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cache_venv.sh
cache_venv docs-venv "$(grep -v '^#' tests/docs/requirements.txt | sort | tr '\n' ' ')" -r tests/docs/requirements.txt
venv=$CACHE_VENV
if ! command -v chromium >/dev/null; then
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core; } \
    >/dev/null || { echo "docs site: chromium is missing and apt-get install chromium failed" >&2; exit 1; }
fi
out=$PWD/.cache/docs-site
rm -rf "$out"
mkdir -p "$out/collections" "$out/sphinx"
chmod 755 "$out/sphinx"
.venv/bin/ansible-galaxy collection build --force --output-path "$out" . >/dev/null
.venv/bin/ansible-galaxy collection install --offline --no-deps --force -p "$out/collections" "$out"/ascend-vllm_pd-*.tar.gz \
  >"$out/install.log" 2>&1 || { cat "$out/install.log" >&2; exit 1; }
# galaxy.yml's dependencies and theirs (the lint checks references into them): the pinned "ansible" package of .venv
deps=$(echo "$PWD"/.venv/lib/python3*/site-packages)
export ANSIBLE_COLLECTIONS_PATH=$out/collections:$deps PATH="$venv/bin:$PATH"
installed=$out/collections/ansible_collections/ascend/vllm_pd
(cd "$installed" && antsibull-docs lint-collection-docs --plugin-docs .)
cd "$out/sphinx"
antsibull-docs sphinx-init --use-current --dest-dir . ascend.vllm_pd >/dev/null
# no network: no intersphinx inventories (their references are the allowed warnings)
printf '\nintersphinx_mapping = {}\n' >> conf.py
mkdir -p rst && chmod og-w rst
antsibull-docs --config-file antsibull-docs.cfg collection --cleanup everything --use-current --dest-dir rst \
  ascend.vllm_pd >/dev/null
sphinx-build -q -b html rst "$out/html" -c . --keep-going -w "$out/sphinx-warnings.txt" 2>"$out/sphinx.log" || true
cd - >/dev/null
"$venv/bin/python" tests/docs/check_site.py --site "$out/html" --collection "$installed" \
  --warnings "$out/sphinx-warnings.txt" --screenshot "$out/index.png"
