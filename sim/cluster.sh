#!/usr/bin/env bash
# Simulated four-node Atlas 800 A3 cluster on one Linux machine (docs/SIM-CONTRACT.md).
#
#   sim/cluster.sh deps     install missing host packages; start dockerd and the registry on 127.0.0.1:5000
#   sim/cluster.sh build    deps + node image, substitute vllm-ascend image (pushed), etcd and Prometheus archives, yuanrong wheel
#   sim/cluster.sh up       build + start nodes a3sim-p0 a3sim-p1 a3sim-d0 a3sim-d1 and wait until they are ready
#                           (A3SIM_NET=netns: each in a network namespace of its own; A3SIM_FRESH=1: new nodes)
#   sim/cluster.sh down     remove nodes, their volumes and lo addresses; stop what this script started
#   sim/cluster.sh status   one-screen summary
#   sim/cluster.sh fault NODE JSON|@FILE|-|clear   write (or remove) /etc/a3sim/faults.json in NODE
#   sim/cluster.sh partition NODE    cut NODE off from the other nodes (packet filter, sim/lib/partition.py)
#   sim/cluster.sh heal [NODE]       heal NODE's cut, or every cut
#   sim/cluster.sh link NODE down|up (A3SIM_NET=netns) NODE's link goes, as when it loses power; or comes back
#   sim/cluster.sh sdist             download the vllm-ascend sdist (cached) and print its path
#
# Every command is idempotent. Caches live in sim/.cache (or $A3SIM_CACHE_DIR) and survive `down`.
set -euo pipefail

SIM_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib
# shellcheck source=SCRIPTDIR/lib/common.sh
. "$SIM_LIB/common.sh"
# shellcheck source=SCRIPTDIR/lib/deps.sh
. "$SIM_LIB/deps.sh"
# shellcheck source=SCRIPTDIR/lib/build.sh
. "$SIM_LIB/build.sh"
# shellcheck source=SCRIPTDIR/lib/net.sh
. "$SIM_LIB/net.sh"
# shellcheck source=SCRIPTDIR/lib/nodes.sh
. "$SIM_LIB/nodes.sh"

# take_lock: one changing command at a time (fd 9; the daemons started here get it closed).
take_lock() {
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/lock"
  if ! flock -n 9; then
    log "another sim/cluster.sh command runs; waiting for it (up to 30 min)"
    flock -w 1800 9 || die "gave up waiting for $CACHE_DIR/lock"
  fi
}

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

main() {
  local cmd=${1:-help}
  [ $# -gt 0 ] && shift
  case "$cmd" in
    deps | build | up | down | status)
      [ $# -eq 0 ] || die "'$cmd' takes no arguments"
      [ "$cmd" = status ] || { need_root && take_lock; }
      "cmd_$cmd"
      ;;
    fault)
      take_lock
      cmd_fault "$@"
      ;;
    partition | heal)
      need_root
      if [ "$cmd" = partition ]; then
        [ $# -eq 1 ] || die "usage: cluster.sh partition NODE"
        python3 "$SIM_LIB/partition.py" cut "$1"
      else
        [ $# -le 1 ] || die "usage: cluster.sh heal [NODE]"
        python3 "$SIM_LIB/partition.py" heal "$@"
      fi
      ;;
    link)
      need_root
      if [ $# -ne 2 ] || ! is_node "$1"; then die "usage: cluster.sh link NODE down|up"; fi
      [ "$(node_net "$1")" = netns ] ||
        die "$1: not a node in a network namespace of its own (A3SIM_NET=netns cluster.sh up)"
      case "$2" in
        down) net_cut "$1" && log "$1: link down" ;;
        up) net_plumb "$1" ;;
        *) die "usage: cluster.sh link NODE down|up" ;;
      esac
      ;;
    sdist)
      [ $# -eq 0 ] || die "'sdist' takes no arguments"
      download_sdist
      echo "$SDIST_FILE"
      return 0
      ;;
    help | -h | --help)
      usage
      return 0
      ;;
    *)
      usage >&2
      die "unknown command '$cmd'"
      ;;
  esac
  log "$cmd: finished in $(_elapsed "$T0") s"
}

main "$@"
