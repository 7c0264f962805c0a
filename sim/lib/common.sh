# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables here are used by the other files of sim/lib/
# Shared helpers of sim/cluster.sh: paths, logging with timings, hashing, the node table.
# Sourced, never run. Everything here follows docs/SIM-CONTRACT.md.

SIM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The cache survives `down`; A3SIM_CACHE_DIR lets CI keep one outside a fresh clone.
CACHE_DIR=${A3SIM_CACHE_DIR:-$SIM_DIR/.cache}

# ---- the cluster (docs/SIM-CONTRACT.md "Nodes") --------------------------------------------------
NODES=(p0 p1 d0 d1)
declare -A NODE_IP=([p0]=127.30.0.11 [p1]=127.30.0.12 [d0]=127.30.0.13 [d1]=127.30.0.14)
declare -A NODE_GROUP=([p0]=prefill [p1]=prefill [d0]=decode [d1]=decode)
NODE_PREFIX=a3sim-

# identity WHAT NAME: node.json ("node-json") or /etc/hccn.conf ("hccn-conf") of node NAME.
identity() {
  local n pairs=()
  for n in "${NODES[@]}"; do pairs+=("$n=${NODE_IP[$n]}"); done
  python3 "$SIM_DIR/lib/identity.py" "$1" "$2" "${pairs[@]}"
}

REGISTRY_ADDR=127.0.0.1:5000
# Serves the artifacts the collection installs by URL (the yuanrong wheel: yuanrong_install_from url, the
# collection's default), loopback only; inventories/sim names the same address.
ARTIFACTS_ADDR=127.0.0.1:5001
VLLM_IMAGE_REF=$REGISTRY_ADDR/ascend/vllm-ascend:v0.18.0-a3
SUITE=bookworm

# ---- logging -------------------------------------------------------------------------------------
T0=$(date +%s.%N)

_elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

log() { printf '[a3sim %6ss] %s\n' "$(_elapsed "$T0")" "$*" >&2; }
warn() { printf '[a3sim %6ss] WARNING: %s\n' "$(_elapsed "$T0")" "$*" >&2; }
die() {
  printf '[a3sim %6ss] ERROR: %s\n' "$(_elapsed "$T0")" "$*" >&2
  exit 1
}

# step NAME: starts a timed step; step_done prints how long the last one took.
_STEP_NAME=""
_STEP_T=""
step() {
  _STEP_NAME=$1
  _STEP_T=$(date +%s.%N)
  log "==> $1"
}
step_done() {
  local extra=${1:-}
  log "<== ${_STEP_NAME}: done in $(_elapsed "$_STEP_T") s${extra:+ ($extra)}"
  # Machine-readable timing lines, for the report of a run.
  mkdir -p "$CACHE_DIR"
  printf '%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "${_STEP_NAME}" "$(_elapsed "$_STEP_T")" >>"$CACHE_DIR/timings.tsv"
}

need_root() { [ "$(id -u)" = 0 ] || die "run as root (needs debootstrap, docker and 'ip addr' on lo)"; }

# ---- hashing -------------------------------------------------------------------------------------
# hash_dir DIR: sha256 over every file's relative path, mode and content (symlinks by target).
hash_dir() {
  local dir=$1
  (
    cd "$dir" || exit 1
    # Python byte-code caches are not inputs (tests create them).
    local prune=(\( -name __pycache__ -o -name .pytest_cache -o -name '*.pyc' \) -prune -o)
    find . "${prune[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum
    find . "${prune[@]}" \( -type f -o -type l \) -printf '%p %m %l\n' | LC_ALL=C sort
  ) | sha256sum | cut -d' ' -f1
}

# hash_text: sha256 of stdin, 16 hex digits (enough to name images).
hash_text() { sha256sum | cut -c1-16; }

# ---- processes started by this script ------------------------------------------------------------
# pid_alive PIDFILE PATTERN: the pid in PIDFILE runs and its command line contains PATTERN.
pid_alive() {
  local pidfile=$1 pattern=$2 pid
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -r "/proc/$pid/cmdline" ] || return 1
  [[ "$(tr "\\0" " " <"/proc/$pid/cmdline" 2>/dev/null)" == *"$pattern"* ]]
}

# stop_pidfile PIDFILE PATTERN NAME: ends the process this script started (TERM, then KILL).
stop_pidfile() {
  local pidfile=$1 pattern=$2 name=$3 pid
  if ! [ -e "$pidfile" ]; then
    log "$name: not started by this script, left alone"
    return 0
  fi
  if pid_alive "$pidfile" "$pattern"; then
    pid=$(cat "$pidfile")
    log "$name: stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      [ -d "/proc/$pid" ] || break
      sleep 0.5
    done
    if [ -d "/proc/$pid" ]; then
      warn "$name: pid $pid still alive after 30 s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  else
    log "$name: pid file $pidfile is stale"
  fi
  rm -f "$pidfile"
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.5 s until it succeeds.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$(($(date +%s) + secs))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
  log "$what: ready"
}
