#!/usr/bin/env bash
# One device call for docs/wip/loss-head.patch (issue 13; written 2026-12-06, seventh session, when no device started: not yet run).
# Build wip/loss-head (or main + the patch), stage it in .gpu, carry .gpu and .alst. Results: $OUT/loss-head.tgz, written
# again after each part (an interrupted call keeps what finished). BUDGET (s, default 470): the parts after the bench
# step run only while it leaves time; a part skipped for time says so. Exit 1 when a part failed or was skipped.
# 1. ulysses_gpu_tests "[layer],[step],[loss],[gemm]"; 2. bench/runs/step_clocks.sh (clocks during bench attention 64K
# and bench step llama 64K tlog); 3. compare --scope step llama 64K tlog with a CUPTI trace (kernel times in the step);
# 4. calibrate --only ulysses-kernels as time allows
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/loss_head_out}; W=$(mktemp -d /tmp/loss_head.XXXXXX); R=$W/loss-head; mkdir -p "$R" "$O"
pk(){ tar czf "$W/loss-head.tgz.part" -C "$W" loss-head && mv "$W/loss-head.tgz.part" "$O/loss-head.tgz"; }
status=0; ok(){ [ "$1" -eq 0 ] || status=1; }  # each part's exit status into the script's
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
PF=h100-sxm-80gb; grep -q H200 $R/gpu.txt && PF=h200-sxm-141gb
left(){ echo $(( ${BUDGET:-470} - ($(date +%s)-t0) )); }
timeout 120 .gpu/bin/ulysses_gpu_tests "[layer],[step],[loss],[gemm]" > $R/gpu-tests.txt 2>&1; rc=$?; ok $rc
echo "gpu tests rc $rc $(el)"; tail -3 $R/gpu-tests.txt; pk
OUT=$R timeout 300 bash bench/runs/step_clocks.sh $PF; rc=$?; ok $rc; echo "clocks rc $rc $(el)"; pk
if [ "$(left)" -gt 60 ]; then
  timeout 90 .gpu/bin/ulysses compare --backend cuda --scope step --model llama-3.1-8b --profile $PF --gpus 1 --sp-size 1 \
    --layers 2 --seq-len 65536 --tiled-logits --warmup 1 --iters 2 --trace $R/trace.json --format json > $R/compare.json \
    2> $R/compare.err; rc=$?; ok $rc; echo "compare rc $rc $(el)"; tail -3 $R/compare.err
  gzip -f $R/trace.json && python3 eval/scripts/step_kernels.py $R/trace.json.gz --min-ms 2 > $R/step-kernels.txt 2>&1
  ok $?; head -40 $R/step-kernels.txt; pk
else ok 1; echo "compare skipped: $(left) s left"; fi
if [ "$(left)" -gt 30 ]; then
  timeout "$(left)" .gpu/bin/ulysses calibrate --backend cuda --only ulysses-kernels --profile $PF --profile-out $R/$PF.yaml \
    --json $R/calibration.json > $R/calibrate-kernels.txt 2>&1; rc=$?; ok $rc; echo "calibrate rc $rc $(el)"
  head -30 $R/calibrate-kernels.txt; pk
else ok 1; echo "calibrate skipped: $(left) s left"; fi
echo "total $(el), status $status"; rm -rf "$W"
exit $status
