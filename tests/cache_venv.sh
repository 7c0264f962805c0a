# shellcheck shell=bash
# Sourced by the test scripts that need a venv of their own (tests/sanity.sh, tests/galaxy_import.sh,
# tests/docs/site.sh). The venvs live in a cache of this machine, not of the checkout: $A3_TEST_CACHE_DIR, by default
# ~/.cache/ascend-vllm-pd, so a fresh clone (as CI makes) reuses them; building them takes minutes.
A3_TEST_CACHE=${A3_TEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ascend-vllm-pd}
mkdir -p "$A3_TEST_CACHE"

# cache_venv NAME STAMP PIP_ARGS...: sets CACHE_VENV to the venv NAME of the cache, built with `pip install PIP_ARGS`
# when it is missing or was built for another STAMP (the pins it holds).
cache_venv() {
  CACHE_VENV=$A3_TEST_CACHE/$1
  local stamp=$2
  shift 2
  if [ ! -x "$CACHE_VENV/bin/python" ] || [ "$(cat "$CACHE_VENV/.installed" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$CACHE_VENV"
    python3 -m venv "$CACHE_VENV"
    "$CACHE_VENV/bin/pip" install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$stamp" > "$CACHE_VENV/.installed"
  fi
}
