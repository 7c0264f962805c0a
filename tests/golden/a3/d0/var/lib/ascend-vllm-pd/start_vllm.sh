#!/usr/bin/env bash
# Ansible managed: run by ascend-vllm.service on the host (docker exec): starts launch_online_dp.py
# (seed step 5) in its own process group and blocks until it exits, so systemd sees the engines end.
# The launcher writes no log and exits 0 even when vllm serve fails: readiness comes from /health.
set -eu
cd /workspace/glm5-a3-large-ep
if [ -s launcher.pgid ] && kill -0 -- "-$(cat launcher.pgid)" 2>/dev/null; then
  echo "a launcher already runs (process group $(cat launcher.pgid)): stop it first (stop_vllm.sh)" >&2; exit 1
fi
# Seed step 5 copies the launcher from the image into the work directory: here, before each start (the role's
# read restarts running engines whose copy differs from the image's).
if ! cmp -s /vllm-workspace/vllm-ascend/examples/external_online_dp/launch_online_dp.py launch_online_dp.py; then
  if ! cp /vllm-workspace/vllm-ascend/examples/external_online_dp/launch_online_dp.py launch_online_dp.py; then
    echo "cannot copy the launcher /vllm-workspace/vllm-ascend/examples/external_online_dp/launch_online_dp.py from the image (vllm_launcher_src)" | tee -a vllm_log.log >&2
    exit 1
  fi
fi
setsid python launch_online_dp.py --dp-size 2 --tp-size 16 --dp-size-local 1 --dp-rank-start 0 --dp-address '<节点2业务IP>' --dp-rpc-port 10521 --vllm-start-port 6700 >> vllm_log.log 2>&1 < /dev/null &
echo $! > launcher.pgid
echo "started process group $(cat launcher.pgid)"
rc=0
wait "$!" || rc=$?
echo "launcher exited with status $rc"
exit "$rc"
