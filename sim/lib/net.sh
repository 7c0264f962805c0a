# shellcheck shell=bash
# The simulated nodes' network (docs/SIM-CONTRACT.md "Network"), in one of two modes (A3SIM_NET):
#
#   host   (default) the nodes share this machine's network namespace; each business IP is a /32 on lo.
#   netns  each node has a network namespace of its own. Its eth0 (one end of a veth pair) holds its business IP
#          in 127.30.0.0/24; the other end sits on the bridge a3sim-br, which holds 127.30.0.1 on this machine.
#          An address can then belong to one node only (the proxies' virtual IP, proxy_vip) and a node can be lost
#          as a whole (its link goes with it).
#
# Addresses in 127.0.0.0/8 are normally local to a namespace. Two settings route them between namespaces, here
# and in every node: route_localnet, and a route for 127.30.0.0/24 in the local table (more specific than lo's
# 127.0.0.0/8) over the bridge or eth0. Nothing leaves this machine: the bridge has no uplink.
# The registry (:5000) and the artifact server (:5001) listen on 127.0.0.1 here; a node reaches them as
# 127.30.0.1 (a DNAT rule on the bridge). This machine's docker sets br_netfilter and a FORWARD policy of DROP, so a
# rule accepts what the bridge forwards between its own ports.

NET_MODE=${A3SIM_NET:-host}
case "$NET_MODE" in host | netns) ;; *) die "A3SIM_NET must be host or netns, not '$NET_MODE'" ;; esac
BRIDGE=a3sim-br
BRIDGE_IP=127.30.0.1
NODE_NET=127.30.0.0/24
FORWARD_RULE=(FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment a3sim-bridge -j ACCEPT)
DNAT_RULE=(PREROUTING -i "$BRIDGE" -d "$BRIDGE_IP/32" -p tcp -m multiport --dports "${REGISTRY_ADDR##*:},${ARTIFACTS_ADDR##*:}"
  -m comment --comment a3sim-bridge -j DNAT --to-destination "${REGISTRY_ADDR%:*}")

node_veth() { echo "a3v-$1"; } # this machine's end of node NAME's veth pair

# net_bridge_up: the bridge, its routes and its packet-filter rules (idempotent).
net_bridge_up() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge || die "cannot add bridge $BRIDGE"
    log "bridge $BRIDGE added"
  fi
  ip link set "$BRIDGE" up
  [[ " $(ip -o -4 addr show dev "$BRIDGE") " == *" $BRIDGE_IP/24 "* ]] || ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
  ip route replace "$NODE_NET" dev "$BRIDGE" table local src "$BRIDGE_IP"
  iptables -C "${FORWARD_RULE[@]}" 2>/dev/null || iptables -I "${FORWARD_RULE[@]}"
  iptables -t nat -C "${DNAT_RULE[@]}" 2>/dev/null || iptables -t nat -I "${DNAT_RULE[@]}"
}

# net_bridge_down: removes what net_bridge_up made (each only if present).
net_bridge_down() {
  while iptables -D "${FORWARD_RULE[@]}" 2>/dev/null; do :; done
  while iptables -t nat -D "${DNAT_RULE[@]}" 2>/dev/null; do :; done
  ip route del "$NODE_NET" dev "$BRIDGE" table local 2>/dev/null || true
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE" && log "bridge $BRIDGE removed"
  fi
}

# net_plumb NAME: node NAME's eth0 on the bridge (idempotent). A node container that restarts gets a new namespace;
# its old veth pair went with the old one, so the plumbing is simply done again.
net_plumb() {
  local name=$1 c pid veth ip
  c=$(node_container "$name")
  veth=$(node_veth "$name")
  ip=${NODE_IP[$name]}
  pid=$(docker container inspect -f '{{.State.Pid}}' "$c") || die "$name: no container $c"
  [ "$pid" -gt 0 ] || die "$name: container $c is not running"
  if nsenter -t "$pid" -n ip -o -4 addr show dev eth0 2>/dev/null | grep -q " $ip/24 "; then
    return 0
  fi
  ip link del "$veth" 2>/dev/null || true
  ip link add "$veth" type veth peer name eth0 netns "$pid" || die "$name: cannot add veth $veth"
  ip link set "$veth" master "$BRIDGE" up
  nsenter -t "$pid" -n sh -ec "
    ip link set lo up
    sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.eth0.route_localnet=1
    ip addr add $ip/24 dev eth0
    ip link set eth0 up
    ip route replace $NODE_NET dev eth0 table local src $ip" || die "$name: cannot configure eth0 in its namespace"
  net_forget_mac "$name"
  log "$name: eth0 $ip/24 on $BRIDGE ($veth)"
}

# net_forget_mac NAME: this machine and the other nodes forget the MAC address they knew for NAME's business IP (a
# former link's; they would send to it until their neighbour entry expires: seconds, a gratuitous ARP of a loopback
# address is not taken everywhere); the next packet asks again.
net_forget_mac() {
  local ip=${NODE_IP[$1]} n pid
  ip neigh flush to "$ip" dev "$BRIDGE" 2>/dev/null || true
  for n in "${NODES[@]}"; do
    [ "$n" != "$1" ] || continue
    pid=$(docker container inspect -f '{{.State.Pid}}' "$(node_container "$n")" 2>/dev/null) || continue
    [ "${pid:-0}" -gt 0 ] || continue
    nsenter -t "$pid" -n ip neigh flush to "$ip" 2>/dev/null || true
  done
}

# net_cut NAME: node NAME's link goes down at once, as when a server loses power (net_plumb brings a new one).
net_cut() { ip link del "$(node_veth "$1")" 2>/dev/null || true; }
