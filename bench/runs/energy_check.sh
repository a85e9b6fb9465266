#!/usr/bin/env bash
# One device call for the eighth session's last changes (issue 13; written 2026-12-06, first run 2026-12-07:
# records/gpu-runs/h100-2026-12-07a/call1): the GPU tests they
# touch, `bench step`'s energy per timed step and tokens per joule at llama 16K and 64K tiled logits, and 32K attention
# at the power limit with both sides timed alike (ours now repeat up to 1000 times, as the peers do).
# Carry .gpu (the CUDA build of ulysses and ulysses_gpu_tests, staged) and .alst (runtime/deepspeed/fetch-stack.sh
# .alst/wheels); ~300 s. Results: $OUT/energy.tgz, written again after each part. Exit 1 when a part failed.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/energy_out}; W=$(mktemp -d /tmp/energy.XXXXXX); R=$W/energy; mkdir -p "$R" "$O"
pk(){ tar czf "$W/energy.tgz.part" -C "$W" energy && mv "$W/energy.tgz.part" "$O/energy.tgz"; }
status=0; ok(){ [ "$1" -eq 0 ] || status=1; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
PF=h100-sxm-80gb; grep -q H200 $R/gpu.txt && PF=h200-sxm-141gb
timeout 150 .gpu/bin/ulysses_gpu_tests "[layer],[step],[loss],[power]" > $R/gpu-tests.txt 2>&1; rc=$?; ok $rc
echo "gpu tests rc $rc $(el)"; tail -2 $R/gpu-tests.txt; pk
OUT=$R PROFILE=$PF BENCH_CASES="llama8b-l2-s16k=--model llama-3.1-8b --seq-len 16384;llama8b-l2-tlog-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits" \
  timeout 240 bash eval/scripts/run_alst_gpu.sh bench-step > $R/bench-step.txt 2>&1; rc=$?; ok $rc
echo "bench step rc $rc $(el)"; grep -hE "tokens/s per GPU|energy over|tokens per joule" $R/bench-step.txt; pk
timeout 120 .gpu/bin/ulysses bench attention --points 32768:32:8:128:1 --min-time-s 4 --json $R/attention-4.json \
  > $R/attention-4.txt 2>&1; rc=$?; ok $rc; echo "attention rc $rc $(el)"; grep -A3 "ours fwd" $R/attention-4.txt; pk
echo "total $(el), status $status"; rm -rf "$W"
exit $status
