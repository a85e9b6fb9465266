#!/usr/bin/env bash
# call 11 (2026-12-06, eighth session): bench step at the other three points with main (loss head merged, power table)
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/c11; mkdir -p $R; t0=$(date +%s)
PF=h100-sxm-80gb; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && PF=h200-sxm-141gb; echo "profile $PF"
OUT=$R PROFILE=$PF BENCH_CASES="llama8b-l2-s16k=--model llama-3.1-8b --seq-len 16384;qwen3-4b-l2-tlog-s32k=--model qwen3-4b --seq-len 32768 --tiled-logits;llama8b-l2-all-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits --tiled-mlp --offload-checkpoints --offload-optimizer" \
  timeout 330 bash eval/scripts/run_alst_gpu.sh bench-step; echo "bench-step rc $? $(( $(date +%s)-t0 )) s"
tar czf $OUT/c11.tgz -C /tmp c11
