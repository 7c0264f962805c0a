#!/usr/bin/env bash
# Ansible managed: stops the launcher's whole process group (killing the launcher alone leaves
# vllm serve running) and removes this host's stale AscendStoreConnector IPC sockets.
set -u
cd /workspace/glm5-a3-large-ep || exit 1
if [ -s launcher.pgid ]; then
  pgid=$(cat launcher.pgid)
  kill -TERM -- "-$pgid" 2>/dev/null || true
  kill -CONT -- "-$pgid" 2>/dev/null || true   # as systemd does: a stopped (frozen) process acts on SIGTERM only once continued
  for _ in $(seq 60); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  rm -f launcher.pgid
  echo "stopped process group $pgid"
fi
rm -f /tmp/lookup_rpc_port_0_dp_rank0
