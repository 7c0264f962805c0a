#!/bin/bash
# Ansible managed: role proxy of ascend.vllm_pd (seed step 5, proxy.sh).
# Backend hosts and ports come from the prefill and decode groups, so their counts always match.
unset ftp_proxy
unset https_proxy
unset http_proxy
cd /workspace/glm5-a3-large-ep
exec python load_balance_proxy_server_example.py --port 8088 --host 0.0.0.0 --prefiller-hosts '<节点0业务IP>' '<节点1业务IP>' --prefiller-ports 6700 6700 --decoder-hosts '<节点2业务IP>' '<节点3业务IP>' --decoder-ports 6700 6700
