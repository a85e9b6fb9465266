#!/usr/bin/env bash
# One device call for issue 14's measurement set on one GPU: the GPU tests of the build ([gpu]), `ulysses bench
# attention` over the issue's 32 points (bf16, S 32K and 128K, H 16 and 32, H_kv H and 8, causal and full, D 128 and
# 64) with PyTorch SDPA's FlashAttention-2 and cuDNN in the same call, and `ulysses bench block` at P=1 (S=32K,
# llama-3.1-8b's H=32/8) next to the PyTorch + cuDNN peer (bench/peers/ulysses_peer.py) of the same call.
# Usage (device machine, repo root): bench/runs/attn_targets.sh BIN_DIR [PROFILE]; results in $OUT/targets.tgz
set -u
B=${1:?usage: attn_targets.sh BIN_DIR [PROFILE]}
P=${2:-h200-sxm-141gb}
R=${OUT:-/tmp/targets_out}; O=$R/targets; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 ULYSSES_HOME=${ULYSSES_HOME:-$PWD}
pack() { tar czf "$R/targets.tgz" -C "$R" targets; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 200 "$B/ulysses_gpu_tests" "[gpu]" > "$O/gpu-tests.txt" 2>&1; echo "gpu tests rc $? ($(( $(date +%s) - t0 )) s)"
  tail -2 "$O/gpu-tests.txt"; pack
fi
pts=""
for D in 128 64; do for S in 32K 128K; do for H in 16 32; do for HK in $H 8; do for C in 1 0; do
  pts="$pts${pts:+,}$S:$H:$HK:$D:$C"
done; done; done; done; done
timeout 360 "$B/ulysses" bench attention --points "$pts" --json "$O/attention.json" > "$O/attention.txt" 2>&1
echo "bench attention rc $? ($(( $(date +%s) - t0 )) s)"; tail -9 "$O/attention.txt"; pack
timeout 120 torchrun --nproc_per_node 1 bench/peers/ulysses_peer.py --seq-len 32768 > "$O/peer-block.json" 2> "$O/peer-block.err"
echo "peer rc $?"
timeout 120 "$B/ulysses" bench block --model llama-3.1-8b --profile "$P" --gpus 1 --sp-size 1 --seq-len 32768 \
  --peer "$O/peer-block.json" > "$O/block-p1.txt" 2>&1; echo "bench block rc $? ($(( $(date +%s) - t0 )) s)"
grep -E "fwd\+bwd|PyTorch|cuDNN" "$O/block-p1.txt" | head -8; pack
