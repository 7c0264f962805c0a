# shellcheck shell=bash
# `cluster.sh deps`: host packages, the docker engine and the local registry.

HOST_PACKAGES=(docker.io debootstrap docker-registry etcd-server etcd-client prometheus iproute2 iptables curl ca-certificates keepalived)
DOCKERD_PIDFILE=$CACHE_DIR/dockerd.pid
DOCKERD_LOG=${A3SIM_DOCKERD_LOG:-/var/log/dockerd.log}
REGISTRY_DIR=$CACHE_DIR/registry
REGISTRY_PIDFILE=$CACHE_DIR/registry.pid
ARTIFACTS_DIR=$CACHE_DIR/wheels/yuanrong
ARTIFACTS_PIDFILE=$CACHE_DIR/artifacts.pid

deps_packages() {
  local pkg missing=()
  for pkg in "${HOST_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing+=("$pkg")
  done
  # The host's python3 downloads wheels and the sdist (pip, venv) and writes the identity files.
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then missing+=(python3 python3-venv); fi
  if ! python3 -m pip --version >/dev/null 2>&1; then missing+=(python3-pip); fi
  if [ ${#missing[@]} -eq 0 ]; then
    log "host packages: all present (${HOST_PACKAGES[*]})"
    return 0
  fi
  step "install host packages: ${missing[*]}"
  # Keep apt's maintainer scripts from starting daemons (docker, etcd, registry): this script
  # starts what it needs itself, on loopback only.
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if ! [ -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  local rc=0
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } || rc=$?
  [ "$own_policy" = 1 ] && rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed (exit $rc)"
  step_done
}

docker_ok() { docker info >/dev/null 2>&1; }

# host_dockerd_pids: dockerd processes of this pid namespace (the nodes' nested engines are not).
host_dockerd_pids() {
  local pid own
  own=$(readlink /proc/self/ns/pid)
  for pid in $(pgrep -x dockerd || true); do
    [ "$(readlink "/proc/$pid/ns/pid" 2>/dev/null)" = "$own" ] && printf '%s ' "$pid"
  done
  return 0
}

# start_background NAME PIDFILE PATTERN LOG TIMEOUT OK_FUNCTION HINT COMMAND...: starts COMMAND in its own
# session (it outlives this script and its terminal) unless the process of PIDFILE still runs, then waits until
# OK_FUNCTION succeeds; dies with HINT and the last lines of LOG otherwise.
start_background() {
  local name=$1 pidfile=$2 pattern=$3 logfile=$4 timeout=$5 ok=$6 hint=$7
  shift 7
  if pid_alive "$pidfile" "$pattern"; then
    log "$name pid $(cat "$pidfile") runs but does not answer yet"
  else
    setsid "$@" >>"$logfile" 2>&1 </dev/null 9>&- &
    echo $! >"$pidfile"
    log "$name started, pid $(cat "$pidfile"), log $logfile"
  fi
  wait_for "$timeout" "$name" "$ok" ||
    die "$name did not answer within $timeout s$hint; last lines of $logfile:$(printf '\n'; tail -n 20 "$logfile")"
}

deps_dockerd() {
  if docker_ok; then
    log "docker engine: answering ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"
    return 0
  fi
  step "start dockerd"
  mkdir -p "$CACHE_DIR"
  if ! pid_alive "$DOCKERD_PIDFILE" dockerd; then
    local others
    others=$(host_dockerd_pids)
    if [ -n "$others" ]; then
      die "a dockerd this script did not start runs (pid $others) but 'docker info' fails; fix or stop it first"
    fi
  fi
  start_background dockerd "$DOCKERD_PIDFILE" dockerd "$DOCKERD_LOG" 90 docker_ok "" dockerd
  step_done
}

# shellcheck disable=SC2153  # REGISTRY_ADDR comes from common.sh
registry_ok() { curl -fsS -m 3 "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

deps_registry() {
  if registry_ok; then
    log "registry: answering on $REGISTRY_ADDR"
    return 0
  fi
  step "start registry on $REGISTRY_ADDR"
  mkdir -p "$REGISTRY_DIR/data"
  cat >"$REGISTRY_DIR/config.yml" <<EOF
# Written by sim/cluster.sh: the simulation's local registry, loopback only.
version: 0.1
log:
  level: warn
  fields:
    service: a3sim-registry
storage:
  # no blob descriptor cache: "this blob exists" is always asked of the storage (a cache kept
  # answering yes for blobs whose directory had been deleted, and docker push skipped them)
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
EOF
  start_background "registry on $REGISTRY_ADDR" "$REGISTRY_PIDFILE" docker-registry "$REGISTRY_DIR/registry.log" 30 registry_ok \
    " (port taken by another program?)" docker-registry serve "$REGISTRY_DIR/config.yml"
  step_done
}

# shellcheck disable=SC2153  # ARTIFACTS_ADDR comes from common.sh
artifacts_ok() { curl -fsS -m 3 -o /dev/null "http://$ARTIFACTS_ADDR/" 2>/dev/null; }

# A static file server for what the nodes download by URL (a site's artifact server or mirror).
deps_artifacts() {
  if artifacts_ok; then
    log "artifact server: answering on $ARTIFACTS_ADDR"
    return 0
  fi
  step "start the artifact server on $ARTIFACTS_ADDR ($ARTIFACTS_DIR)"
  mkdir -p "$ARTIFACTS_DIR"
  start_background "artifact server on $ARTIFACTS_ADDR" "$ARTIFACTS_PIDFILE" http.server "$CACHE_DIR/artifacts.log" 30 \
    artifacts_ok " (port taken by another program?)" python3 -m http.server --bind "${ARTIFACTS_ADDR%:*}" --directory "$ARTIFACTS_DIR" "${ARTIFACTS_ADDR##*:}"
  step_done
}

# deps_net_cls: the cgroup v1 net_cls hierarchy, by which the partition rules tell the nodes' processes apart
# (sim/lib/partition.py). Mounted before the nodes start, so docker places them in it too.
deps_net_cls() {
  local dir=/sys/fs/cgroup/net_cls
  [ -e /sys/fs/cgroup/cgroup.controllers ] && { log "cgroup v2: no net_cls hierarchy (partitions are not available)"; return 0; }
  mountpoint -q "$dir" && return 0
  if ! { mkdir -p "$dir" && mount -t cgroup -o net_cls net_cls "$dir"; }; then
    die "cannot mount the net_cls cgroup hierarchy at $dir"
  fi
  log "mounted the net_cls cgroup hierarchy at $dir"
}

cmd_deps() {
  need_root
  deps_packages
  deps_net_cls
  deps_dockerd
  deps_registry
  deps_artifacts
}
