# shellcheck shell=bash
# `cluster.sh up|down|status|fault`: the four simulated A3 nodes.

# A node is a container with systemd as PID 1 and its own docker engine, on the host network (A3SIM_NET=host) or
# in a network namespace of its own that sim/lib/net.sh plumbs (A3SIM_NET=netns).
# --privileged fails on this kind of machine (root lacks CAP_SYS_RESOURCE), so: every capability but
# that one, no seccomp/apparmor confinement, writable /proc/sys and /sys (hugepages), all devices
# (mknod of the fake Ascend devices, and the nested engine's --device).
NODE_NETWORK=host
[ "$NET_MODE" = host ] || NODE_NETWORK=none
NODE_RUN_FLAGS=(
  --network "$NODE_NETWORK"
  --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw
  --tmpfs /run --tmpfs /run/lock
  --cap-add ALL --cap-drop SYS_RESOURCE
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined
  --security-opt systempaths=unconfined
  --device-cgroup-rule 'a *:* rwm'
  --shm-size 1g
)
NODE_READY_TIMEOUT=${A3SIM_NODE_READY_TIMEOUT:-240}

node_container() { echo "$NODE_PREFIX$1"; }
node_volume() { echo "$NODE_PREFIX$1-docker"; }

is_node() {
  local n
  for n in "${NODES[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

# node_state NAME: "missing", or "<running> <image>" of its container.
node_state() {
  local out
  if out=$(docker container inspect -f '{{.State.Running}} {{.Config.Image}}' "$(node_container "$1")" 2>/dev/null); then
    echo "$out"
  else
    echo missing
  fi
}

# node_net NAME: the network mode its container was started in (label a3sim.net; empty without a container).
node_net() { docker container inspect -f '{{index .Config.Labels "a3sim.net"}}' "$(node_container "$1")" 2>/dev/null; }

# node_current NAME: its container runs the wanted image in the wanted network mode.
node_current() { [ "$(node_state "$1")" = "true $NODE_IMAGE" ] && [ "$(node_net "$1")" = "$NET_MODE" ]; }

remove_node() { # NAME
  local c v
  c=$(node_container "$1")
  v=$(node_volume "$1")
  if docker container inspect "$c" >/dev/null 2>&1; then
    docker rm -f -v "$c" >/dev/null || die "cannot remove container $c"
    log "$1: container $c removed"
  fi
  if docker volume inspect "$v" >/dev/null 2>&1; then
    docker volume rm -f "$v" >/dev/null || die "cannot remove volume $v"
    log "$1: volume $v removed"
  fi
}

# remove_nodes NAME...: removes the nodes' containers and volumes in parallel (removing a volume that
# holds a pulled image takes seconds).
remove_nodes() {
  local n pids=() rc=0 pid
  for n in "$@"; do
    remove_node "$n" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  [ "$rc" = 0 ] || die "could not remove node(s) $* (see above)"
}

# remove_stale_nodes: every node container not running the wanted image goes, with its volume, and so
# does a leftover volume without a container: a new node always starts with an empty nested engine.
remove_stale_nodes() {
  local n state stale=()
  for n in "${NODES[@]}"; do
    node_current "$n" && continue
    state=$(node_state "$n")
    if [ "$state" != missing ]; then
      log "$n: $(node_container "$n") is '$state', replacing it (wanted: image $NODE_IMAGE, network $NET_MODE)"
    elif ! docker volume inspect "$(node_volume "$n")" >/dev/null 2>&1; then
      continue
    fi
    stale+=("$n")
  done
  [ ${#stale[@]} -eq 0 ] || remove_nodes "${stale[@]}"
}

start_node() { # NAME -> 0 started, 1 reused
  local name=$1 c v state
  c=$(node_container "$name")
  v=$(node_volume "$name")
  if node_current "$name"; then
    log "$name: $c runs image $NODE_IMAGE (network $NET_MODE), reused"
    return 1
  fi
  # (remove_stale_nodes has removed a stale container and its volume)
  docker volume create --label "a3sim.node=$name" "$v" >/dev/null
  docker run -d --name "$c" --hostname "$name" "${NODE_RUN_FLAGS[@]}" \
    -v "$v:/var/lib/docker" \
    --label "a3sim.node=$name" --label "a3sim.business_ip=${NODE_IP[$name]}" --label "a3sim.net=$NET_MODE" \
    "$NODE_IMAGE" >/dev/null || die "$name: docker run of $c failed"
  log "$name: $c started"
  return 0
}

# lo_has_ip IP: IP/32 is configured on lo (no `| grep -q`: with pipefail its early exit can fail the pipe).
lo_has_ip() { [[ " $(ip -o -4 addr show dev lo) " == *" $1/32 "* ]]; }

ensure_lo_ip() { # IP
  if lo_has_ip "$1"; then return 0; fi
  ip addr add "$1/32" dev lo || die "cannot add $1/32 to lo"
  log "lo: added $1/32"
}

remove_lo_ip() { # IP
  if lo_has_ip "$1"; then ip addr del "$1/32" dev lo && log "lo: removed $1/32"; fi
}

write_identity() { # NAME
  local c
  c=$(node_container "$1")
  identity node-json "$1" | docker exec -i "$c" sh -c \
    'mkdir -p /etc/a3sim && cat >/etc/a3sim/node.json.tmp && mv /etc/a3sim/node.json.tmp /etc/a3sim/node.json' ||
    die "$1: cannot write /etc/a3sim/node.json"
  identity hccn-conf "$1" | docker exec -i "$c" sh -c 'cat >/etc/hccn.conf' ||
    die "$1: cannot write /etc/hccn.conf"
  # every preflight query answered once now, in one Python process: a first hccn_tool call then costs what the
  # compiled tool costs instead of a Python start (sim/tools/hccn_tool); best effort, a miss only runs Python
  docker exec "$c" /usr/local/Ascend/driver/tools/hccn_tool --a3sim-warm >/dev/null 2>&1 ||
    log "$1: the hccn_tool answers were not stored in advance (each first call runs Python)"
}

# node_ready NAME: systemd up (running or degraded), the nested engine answers, devices exist.
node_ready() {
  local c s
  c=$(node_container "$1")
  s=$(docker exec "$c" systemctl is-system-running 2>/dev/null) || true
  case "$s" in running | degraded) ;; *) return 1 ;; esac
  docker exec "$c" docker info >/dev/null 2>&1 || return 1
  docker exec "$c" test -c /dev/davinci_manager -a -c /dev/davinci15 -a -c /dev/hisi_hdc -a -c /dev/devmm_svm
}

explain_node() { # NAME: what is wrong inside a node that did not get ready
  local c
  c=$(node_container "$1")
  {
    echo "---- $1 ($c): state: $(node_state "$1")"
    echo "systemctl is-system-running: $(docker exec "$c" systemctl is-system-running 2>&1)"
    echo "failed units:"
    docker exec "$c" systemctl --failed --no-legend --plain 2>&1 | sed 's/^/  /'
    echo "pending jobs:"
    docker exec "$c" systemctl list-jobs --no-legend 2>&1 | head -n 15 | sed 's/^/  /'
    echo "docker.service journal:"
    docker exec "$c" journalctl -u docker.service -u containerd.service -n 15 --no-pager 2>&1 | sed 's/^/  /'
    echo "container log:"
    docker logs --tail 15 "$c" 2>&1 | sed 's/^/  /'
  } >&2
}

wait_nodes_ready() {
  local deadline n pending
  deadline=$(($(date +%s) + NODE_READY_TIMEOUT))
  pending=("${NODES[@]}")
  while [ ${#pending[@]} -gt 0 ]; do
    local still=()
    for n in "${pending[@]}"; do
      if node_ready "$n"; then
        log "$n: ready ($(docker exec "$(node_container "$n")" systemctl is-system-running 2>/dev/null))"
      else
        [ "$(node_state "$n")" = missing ] && die "$n: container $(node_container "$n") disappeared"
        case "$(node_state "$n")" in false*)
          explain_node "$n"
          die "$n: container $(node_container "$n") stopped while booting"
          ;;
        esac
        still+=("$n")
      fi
    done
    pending=("${still[@]}")
    [ ${#pending[@]} -gt 0 ] || break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for n in "${pending[@]}"; do explain_node "$n"; done
      die "nodes not ready within ${NODE_READY_TIMEOUT}s: ${pending[*]} (see above)"
    fi
    sleep 1
  done
}

warn_degraded() {
  local n failed
  for n in "${NODES[@]}"; do
    failed=$(docker exec "$(node_container "$n")" systemctl --failed --no-legend --plain 2>/dev/null | awk '{ print $1 }' | tr '\n' ' ')
    [ -z "$failed" ] || warn "$n: failed units: $failed"
  done
}

cmd_up() {
  cmd_build
  local n started=0
  step "start nodes ${NODES[*]}"
  # A3SIM_FRESH=1: new nodes even where current ones run (a scenario that must not inherit a previous run's state)
  if [ "${A3SIM_FRESH:-0}" = 1 ]; then remove_nodes "${NODES[@]}"; fi
  remove_stale_nodes
  if [ "$NET_MODE" = netns ]; then
    for n in "${NODES[@]}"; do remove_lo_ip "${NODE_IP[$n]}"; done
    net_bridge_up
  else
    net_bridge_down   # its route would take the business IPs away from lo
  fi
  for n in "${NODES[@]}"; do
    [ "$NET_MODE" = netns ] || ensure_lo_ip "${NODE_IP[$n]}"
    if start_node "$n"; then started=$((started + 1)); fi
    [ "$NET_MODE" = host ] || net_plumb "$n"
  done
  for n in "${NODES[@]}"; do write_identity "$n"; done
  wait_nodes_ready
  warn_degraded
  step_done "$started started, $((${#NODES[@]} - started)) reused"
  print_nodes_table
}

cmd_down() {
  need_root
  local n
  # Containers and volumes of an earlier session stay on disk when its engine was ended: start the
  # engine to remove them (and stop it again below, since then this script started it).
  if ! docker_ok && command -v dockerd >/dev/null; then deps_dockerd; fi
  step "tear down the simulated cluster"
  if docker_ok; then
    remove_nodes "${NODES[@]}"
  else
    warn "no docker engine: no node containers or volumes to remove"
  fi
  if command -v iptables >/dev/null && iptables -S A3SIM-PART >/dev/null 2>&1; then
    log "partitions: $(python3 "$SIM_LIB/partition.py" heal)"
  fi
  for n in "${NODES[@]}"; do remove_lo_ip "${NODE_IP[$n]}"; done
  net_bridge_down
  if [ -e "$REGISTRY_PIDFILE" ]; then
    stop_pidfile "$REGISTRY_PIDFILE" docker-registry "registry"
    # Blobs of earlier pushes of the tag: collected while the registry is stopped (storage stays).
    docker-registry garbage-collect --delete-untagged "$REGISTRY_DIR/config.yml" >>"$REGISTRY_DIR/gc.log" 2>&1 ||
      warn "registry garbage-collect failed (see $REGISTRY_DIR/gc.log)"
  else
    log "registry: not started by this script, left alone"
  fi
  stop_pidfile "$ARTIFACTS_PIDFILE" http.server "artifact server"
  stop_pidfile "$DOCKERD_PIDFILE" dockerd "dockerd"
  step_done
}

print_nodes_table() {
  local n c state sysd dock img ip lo
  printf '%-5s %-8s %-9s %-13s %-8s %-10s %-8s %s\n' NODE GROUP CONTAINER BUSINESS_IP ON_LO SYSTEMD DOCKER IMAGE
  for n in "${NODES[@]}"; do
    c=$(node_container "$n")
    ip=${NODE_IP[$n]}
    lo=no
    lo_has_ip "$ip" && lo=yes
    state=$(node_state "$n")
    sysd=-
    dock=-
    img=-
    case "$state" in
      missing) img="(no container)" ;;
      true*)
        img=${state#true }
        sysd=$(docker exec "$c" systemctl is-system-running 2>/dev/null) || true
        dock=$(docker exec "$c" docker version -f '{{.Server.Version}}' 2>/dev/null) || dock=down
        ;;
      *) img="${state#false } (stopped)" ;;
    esac
    case "$img" in "${NODE_IMAGE:-}" | "(no container)") ;; a3sim/*) img="$img (stale: wanted ${NODE_IMAGE:-?})" ;; esac
    printf '%-5s %-8s %-9s %-13s %-8s %-10s %-8s %s\n' "$n" "${NODE_GROUP[$n]}" "$c" "$ip" "$lo" "${sysd:--}" "$dock" "$img"
  done
}

cmd_status() {
  local dpid="" rpid=""
  pid_alive "$DOCKERD_PIDFILE" dockerd && dpid=" (started by cluster.sh, pid $(cat "$DOCKERD_PIDFILE"))"
  pid_alive "$REGISTRY_PIDFILE" docker-registry && rpid=" (started by cluster.sh, pid $(cat "$REGISTRY_PIDFILE"))"
  if docker_ok; then
    echo "docker engine: up, $(docker version -f '{{.Server.Version}}')$dpid"
  else
    echo "docker engine: DOWN"
  fi
  if registry_ok; then echo "registry:      up on $REGISTRY_ADDR$rpid"; else echo "registry:      DOWN ($REGISTRY_ADDR)"; fi
  if artifacts_ok; then echo "artifacts:     up on $ARTIFACTS_ADDR ($ARTIFACTS_DIR)"; else echo "artifacts:     DOWN ($ARTIFACTS_ADDR)"; fi
  compute_image_names
  local img
  for img in "$NODE_IMAGE" "$VLLM_IMAGE"; do
    if docker_ok && image_exists "$img"; then
      printf 'image:         %s (%s)\n' "$img" "$(image_size "$img")"
    else
      printf 'image:         %s NOT BUILT (inputs changed or never built: cluster.sh build)\n' "$img"
    fi
  done
  if [ -s "$ARTIFACTS_ENV" ]; then
    sed -n 's/^A3SIM_\(ETCD_ARCHIVE\|YUANRONG_WHEEL\)=/artifact:      /p' "$ARTIFACTS_ENV"
  fi
  if docker_ok; then
    print_nodes_table
  else
    echo "nodes:         unknown (engine down)"
  fi
}

cmd_fault() { # NODE JSON|@FILE|-|clear
  [ $# -eq 2 ] || die "usage: cluster.sh fault NODE '{\"unhealthy_chips\": [3]}'|@FILE|-|clear"
  local name=$1 spec=$2 c json
  is_node "$name" || die "unknown node '$name' (nodes: ${NODES[*]})"
  c=$(node_container "$name")
  case "$(node_state "$name")" in true*) ;; *) die "$name: container $c is not running (cluster.sh up)" ;; esac
  if [ "$spec" = clear ]; then
    docker exec "$c" rm -f /etc/a3sim/faults.json || die "$name: cannot remove faults.json"
    log "$name: faults cleared"
    return 0
  fi
  case "$spec" in
    -) json=$(cat) ;;
    @*) json=$(cat "${spec#@}") || die "cannot read ${spec#@}" ;;
    *) json=$spec ;;
  esac
  printf '%s' "$json" | python3 -c 'import json, sys
d = json.load(sys.stdin)
if not isinstance(d, dict): sys.exit("a JSON object is required")' ||
    die "fault spec for $name is not a JSON object: $json"
  printf '%s\n' "$json" | docker exec -i "$c" sh -c \
    'mkdir -p /etc/a3sim && cat >/etc/a3sim/faults.json.tmp && mv /etc/a3sim/faults.json.tmp /etc/a3sim/faults.json' ||
    die "$name: cannot write faults.json"
  log "$name: /etc/a3sim/faults.json = $json"
}
