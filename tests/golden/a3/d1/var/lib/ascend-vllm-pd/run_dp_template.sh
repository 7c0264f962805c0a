#!/usr/bin/env bash
# Ansible managed: role vllm_decode of ascend.vllm_pd; change the inventory, not this file.
# launch_online_dp.py runs it as: bash ./run_dp_template.sh DEVICES PORT DP_SIZE DP_RANK DP_ADDRESS DP_RPC_PORT TP_SIZE
nic_name='<业务网卡名>'
local_ip='<节点3业务IP>'
ds_worker_addr='<节点3业务IP>:18481'
export VLLM_ASCEND_ENABLE_FUSED_MC2="1"
export HCCL_OP_EXPANSION_MODE="AIV"
export HCCL_IF_IP="$local_ip"
export GLOO_SOCKET_IFNAME="$nic_name"
export TP_SOCKET_IFNAME="$nic_name"
export HCCL_SOCKET_IFNAME="$nic_name"
export OMP_PROC_BIND="false"
export OMP_NUM_THREADS="10"
export PYTORCH_NPU_ALLOC_CONF="expandable_segments:True"
export HCCL_BUFFSIZE="256"
export ASCEND_AGGREGATE_ENABLE="1"
export ACL_OP_INIT_MODE="1"
export ASCEND_A3_ENABLE="1"
export VLLM_NIXL_ABORT_REQUEST_TIMEOUT="300000"
export ASCEND_RT_VISIBLE_DEVICES="$1"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/lib"
export DS_WORKER_ADDR="$ds_worker_addr"
export PYTHONHASHSEED="0"
export ASCEND_TRANSPORT_PRINT="1"
export TASK_QUEUE_ENABLE="1"
export VLLM_ASCEND_ENABLE_MLAPO="1"
unset GOOGLE_LOGTOSTDERR GOOGLE_ALSOLOGTOSTDERR
exec vllm serve /data/GLM-5.1-w8a8 \
  --host 0.0.0.0 \
  --port "$2" \
  --data-parallel-size "$3" \
  --data-parallel-rank "$4" \
  --data-parallel-address "$5" \
  --data-parallel-rpc-port "$6" \
  --tensor-parallel-size "$7" \
  --enable-expert-parallel \
  --speculative-config '{"num_speculative_tokens": 3, "method": "deepseek_mtp"}' \
  --seed 1024 \
  --served-model-name glm-5.1 \
  --max-model-len 202752 \
  --additional-config '{"enable_npugraph_ex": true, "fuse_muls_add": true, "multistream_overlap_shared_expert": true, "recompute_scheduler_enable": true}' \
  --trust-remote-code \
  --quantization ascend \
  --enable-auto-tool-choice \
  --tool-call-parser glm47 \
  --reasoning-parser glm45 \
  --max-num-batched-tokens 32 \
  --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [4, 8, 12, 16, 20, 24, 28, 32]}' \
  --max-num-seqs 8 \
  --gpu-memory-utilization 0.92 \
  --async-scheduling \
  --kv-transfer-config "$(cat "kv_transfer_config_dp$4.json")"
