#!/usr/bin/env bash
# One device call for issue 14's measurement set on one GPU: the GPU tests of the build ([gpu]), `ulysses bench
# attention` over the issue's 32 points (bf16, S 32K and 128K, H 16 and 32, H_kv H and 8, causal and full, D 128 and
# 64) with PyTorch SDPA's FlashAttention-2 and cuDNN in the same call, and `ulysses bench block` at P=1 (S=32K,
# llama-3.1-8b's H=32/8) next to the PyTorch + cuDNN peer (bench/peers/ulysses_peer.py) of the same call.
# Every file stays outside $OUT but for $OUT/targets.tgz (packed after each step: a call cut short keeps what ran);
# rc.txt in it has each step's exit status. Timeouts sum to 560 s (the device's limit per call is 600 s).
# Exit status: 0 when every step exited 0, else 1.
# Usage (device machine, repo root): bench/runs/attn_targets.sh BIN_DIR [PROFILE] (default: the preset of the GPU
# found, h100-sxm-80gb or h200-sxm-141gb); SKIP_TESTS=1 leaves the GPU tests out.
set -u
B=${1:?usage: attn_targets.sh BIN_DIR [PROFILE]}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H100*) dflt=h100-sxm-80gb ;; *) dflt=h200-sxm-141gb ;; esac
P=${2:-$dflt}
W=$(mktemp -d /tmp/attn_targets.XXXXXX); O=$W/targets; mkdir -p "$O" "${OUT:-/tmp/targets_out}"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 ULYSSES_HOME=${ULYSSES_HOME:-$PWD}
# the archive is written beside and renamed into place: an interrupted pack leaves the previous whole one, never a
# truncated one
pack() { tar czf "$W/targets.tgz.part" -C "$W" targets && mv "$W/targets.tgz.part" "${OUT:-/tmp/targets_out}/targets.tgz"; }
status=0
step() {  # NAME RC: its exit status into rc.txt
  echo "$1 $2" >> "$O/rc.txt"; [ "$2" = 0 ] || status=1
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
echo "profile $P" >> "$O/gpu.txt"
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 140 "$B/ulysses_gpu_tests" "[gpu]" > "$O/gpu-tests.txt" 2>&1; rc=$?; step gpu-tests $rc
  echo "gpu tests rc $rc ($(( $(date +%s) - t0 )) s)"; tail -2 "$O/gpu-tests.txt"; pack
fi
pts=""
for D in 128 64; do for S in 32K 128K; do for H in 16 32; do for HK in $H 8; do for C in 1 0; do
  pts="$pts${pts:+,}$S:$H:$HK:$D:$C"
done; done; done; done; done
timeout 300 "$B/ulysses" bench attention --points "$pts" --json "$O/attention.json" > "$O/attention.txt" 2>&1; rc=$?
step bench-attention $rc; echo "bench attention rc $rc ($(( $(date +%s) - t0 )) s)"; tail -9 "$O/attention.txt"; pack
timeout 60 torchrun --nproc_per_node 1 bench/peers/ulysses_peer.py --seq-len 32768 > "$O/peer-block.json" 2> "$O/peer-block.err"
rc=$?; step peer-block $rc; echo "peer rc $rc"
timeout 60 "$B/ulysses" bench block --model llama-3.1-8b --profile "$P" --gpus 1 --sp-size 1 --seq-len 32768 \
  --peer "$O/peer-block.json" > "$O/block-p1.txt" 2>&1; rc=$?
step bench-block $rc; echo "bench block rc $rc ($(( $(date +%s) - t0 )) s)"
grep -E "fwd\+bwd|PyTorch|cuDNN" "$O/block-p1.txt" | head -8; pack
rm -rf "$W"
exit $status
