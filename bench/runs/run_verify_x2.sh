#!/usr/bin/env bash
# Short verification call on 2 GPUs after a small change: GPU tests ([gpu],[flash], then the p2p
# timeout test alone), compare on the CUDA backend (single process), and two D=128 target points
# of `ulysses bench attention` with the PyTorch peers. Everything packed into $OUT/verify.tgz.
# Usage (device machine, repo root, ULYSSES_HOME=$PWD): bench/runs/run_verify_x2.sh BIN_DIR
set -u
B=${1:?usage: run_verify_x2.sh BIN_DIR}
O=${OUT:-/tmp/verify_out}/verify
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
timeout 170 "$B/ulysses_gpu_tests" "[gpu],[flash]" > "$O/gpu-tests.txt" 2>&1; echo "gpu tests [gpu],[flash] rc=$?"
timeout 40 "$B/ulysses_gpu_tests" "[p2p_timeout]" > "$O/p2p-timeout.txt" 2>&1; echo "gpu test [p2p_timeout] rc=$?"
timeout 60 "$B/ulysses" compare --backend cuda --model llama-3.1-8b --profile h200-sxm-141gb --gpus 2 --sp-size 2 \
  --seq-len 32768 > "$O/compare-single.txt" 2>&1; echo "compare rc=$?"
timeout 90 "$B/ulysses" bench attention --points 32K:16:16:128:1,128K:16:8:128:1 > "$O/points.txt" 2>&1
echo "bench attention points rc=$?"
tar czf "${OUT:-/tmp/verify_out}/verify.tgz" -C "$(dirname "$O")" verify
tail -2 "$O/gpu-tests.txt"; tail -2 "$O/p2p-timeout.txt"; cat "$O/compare-single.txt" | head -12; tail -12 "$O/points.txt"
