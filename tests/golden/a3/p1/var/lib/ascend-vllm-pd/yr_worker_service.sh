#!/usr/bin/env bash
# Ansible managed: role yuanrong of ascend.vllm_pd, run by ascend-yr-worker.service on the host.
#   run   start the worker with run_yr_worker.sh (dscli start returns once it is ready), then block
#         while it lives, so systemd sees the worker end and restarts it
#   stop  dscli stop (SIGTERM, SIGKILL after its timeout); the worker's etcd key goes with it
set -u
cd /workspace/glm5-a3-large-ep || exit 1
addr='<节点1业务IP>:18481'
worker_pid() { pgrep -o -f -- "-worker_address=$addr"; }
stopping=.yr_worker_stopping   # written by 'stop': the worker's end is then planned, not a failure
ready=.yr_worker_ready   # written once dscli start reported the worker ready (the unit's ExecStartPost waits for it)
case "${1:-}" in
  run)
    if worker_pid >/dev/null; then
      echo "replacing the worker already running at $addr (not started by ascend-yr-worker.service)"
      dscli stop -w "$addr" || true
    fi
    rm -f "$stopping" "$ready"
    bash run_yr_worker.sh || exit $?
    pid=$(worker_pid) || { echo "dscli start returned but no worker runs at $addr" >&2; exit 1; }
    echo "worker $addr runs as pid $pid"
    echo "$pid" > "$ready"
    tail --pid="$pid" -f /dev/null
    rm -f "$ready"
    if [ -e "$stopping" ]; then rm -f "$stopping"; echo "worker $addr (pid $pid) stopped"; exit 0; fi
    echo "worker $addr (pid $pid) ended" >&2
    exit 1
    ;;
  stop)
    rm -f "$ready"
    worker_pid >/dev/null || exit 0
    touch "$stopping"
    exec dscli stop -w "$addr"
    ;;
  *)
    echo "usage: $0 run|stop" >&2
    exit 2
    ;;
esac
