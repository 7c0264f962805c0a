#!/usr/bin/env bash
# Ansible managed: role yuanrong of ascend.vllm_pd (seed step 4, run_yr_worker.sh).
# DS_WORKER_ADDR of the vLLM engines is the --worker_address below, by construction.
set -eu
mkdir -p /workspace/yuanrong /workspace
cd /workspace/yuanrong
exec dscli start --interleave 0-7 -t 250 -w --worker_address '<节点3业务IP>:18481' --etcd_address '<节点0业务IP>:2379' --shared_memory_size_mb 512000 --node_timeout_s 20 --node_dead_timeout_s 30 --arena_per_tenant 1 --enable_huge_tlb true --liveness_check_path /workspace/liveness
