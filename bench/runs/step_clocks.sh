#!/usr/bin/env bash
# One device call for issue 13's open question (docs/STEP_RUNTIME.md, the 368640 table): why our attention backward runs
# at 497 TFLOP/s inside `bench step` at llama-3.1-8b 64K tiled logits while `bench attention` measures it level with
# cuDNN's. nvidia-smi samples the SM and memory clocks, power and temperature every 50 ms (smi.csv) while
#   1. `ulysses bench attention --points 65536:32:8:128:1` (the step's attention shape, with both PyTorch peers) runs,
#   2. `eval/scripts/run_alst_gpu.sh bench-step` runs that one point (our step, then the HF Accelerate + DeepSpeed peer);
# marks.txt has each part's start and end in the samples' clock (UTC), so the samples of each part can be told apart.
# Carry .gpu (the CUDA build of ulysses staged) and .alst (runtime/deepspeed/fetch-stack.sh .alst/wheels).
# Results: $OUT/clocks.tgz, written again after each part (an interrupted call keeps what finished).
# Written 2026-12-06 (sixth session); first run in the eighth (records/gpu-runs/h100-2026-12-06f/call1/clocks).
# smi-clocks.txt: eval/scripts/smi_clocks.py over the marked parts (bench step's own table splits ours from the peer).
# Usage (device machine, repo root): bench/runs/step_clocks.sh [PROFILE] (default: the preset of the GPU found)
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H100*) dflt=h100-sxm-80gb ;; *) dflt=h200-sxm-141gb ;; esac
P=${1:-$dflt}
W=$(mktemp -d /tmp/step_clocks.XXXXXX); R=$W/clocks; mkdir -p "$R" "${OUT:-/tmp/clocks_out}"
O=${OUT:-/tmp/clocks_out}
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
pack() { tar czf "$W/clocks.tgz.part" -C "$W" clocks && mv "$W/clocks.tgz.part" "$O/clocks.tgz"; }
mark() { echo "$(date -u '+%Y/%m/%d %H:%M:%S.%3N') $1" >> "$R/marks.txt"; }
echo "$gpu, profile $P" > "$R/gpu.txt"
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 50 > "$R/smi.csv" 2>&1 &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT
status=0
mark "attention start"
timeout 120 .gpu/bin/ulysses bench attention --points 65536:32:8:128:1 --json "$R/attention.json" > "$R/attention.txt" 2>&1 \
  || status=1
mark "attention end"; tail -6 "$R/attention.txt"; pack
mark "bench-step start"
OUT=$R PROFILE=$P BENCH_CASES="llama8b-l2-tlog-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits" \
  timeout 300 bash eval/scripts/run_alst_gpu.sh bench-step || status=1
mark "bench-step end"
kill $smi 2>/dev/null
python3 eval/scripts/smi_clocks.py "$R/smi.csv" "$R/marks.txt" > "$R/smi-clocks.txt" 2>&1 && cat "$R/smi-clocks.txt"
pack
rm -rf "$W"
exit $status
