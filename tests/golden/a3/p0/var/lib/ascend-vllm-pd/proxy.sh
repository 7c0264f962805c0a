#!/usr/bin/env bash
# Ansible managed: role proxy of ascend.vllm_pd (seed step 5, proxy.sh).
# Backend hosts and ports come from the prefill and decode groups, so their counts always match.
# a3_proxy.py runs load_balance_proxy_server_example.py (same directory) with the seed's arguments and adds
# health probes, rotation changes and honest errors; its own options start with --a3-.
unset ftp_proxy
unset https_proxy
unset http_proxy
cd /workspace/glm5-a3-large-ep || exit 1
exec python a3_proxy.py --port 8088 --host 0.0.0.0 --prefiller-hosts '<节点0业务IP>' '<节点1业务IP>' --prefiller-ports 6700 6700 --decoder-hosts '<节点2业务IP>' '<节点3业务IP>' --decoder-ports 6700 6700 --a3-probe-interval 5 --a3-probe-timeout 2 --a3-fail-threshold 3 --a3-first-byte-timeout 300 --a3-retry-after 10 --a3-etcd '<节点0业务IP>:2379' --a3-ds-worker '<节点0业务IP>:18481' --a3-ds-worker '<节点1业务IP>:18481' --a3-ds-worker '<节点2业务IP>:18481' --a3-ds-worker '<节点3业务IP>:18481' --a3-admin-host 127.0.0.1 --a3-admin-port 8089
