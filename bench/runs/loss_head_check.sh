#!/usr/bin/env bash
# One device call for docs/wip/loss-head.patch (issue 13; written 2026-12-06, seventh session, when no device started: not yet run).
# Build wip/loss-head (or main + the patch), stage it in .gpu, carry .gpu and .alst. Results: $OUT/c7.tgz, written again
# after each part. BUDGET (s, default 470): the parts after the bench step run only while it leaves time.
# 1. ulysses_gpu_tests "[layer],[step],[loss],[gemm]"; 2. bench/runs/step_clocks.sh (clocks during bench attention 64K
# and bench step llama 64K tlog); 3. compare --scope step llama 64K tlog with a CUPTI trace (kernel times in the step);
# 4. calibrate --only ulysses-kernels as time allows
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
R=/tmp/c7; mkdir -p $R
pk(){ tar czf /tmp/c7.tgz.part -C /tmp c7 && mv /tmp/c7.tgz.part $OUT/c7.tgz; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
PF=h100-sxm-80gb; grep -q H200 $R/gpu.txt && PF=h200-sxm-141gb
timeout 120 .gpu/bin/ulysses_gpu_tests "[layer],[step],[loss],[gemm]" > $R/gpu-tests.txt 2>&1; echo "gpu tests rc $? $(el)"; tail -3 $R/gpu-tests.txt; pk
OUT=$R timeout 300 bash bench/runs/step_clocks.sh $PF; echo "clocks rc $? $(el)"; pk
left=$(( ${BUDGET:-470} - ($(date +%s)-t0) ))
[ $left -gt 60 ] && timeout 90 .gpu/bin/ulysses compare --backend cuda --scope step --model llama-3.1-8b --profile $PF --gpus 1 --sp-size 1 --layers 2 \
  --seq-len 65536 --tiled-logits --warmup 1 --iters 2 --trace $R/trace.json --format json > $R/compare.json 2> $R/compare.err
echo "compare rc $? $(el)"; tail -3 $R/compare.err; gzip -f $R/trace.json 2>/dev/null
python3 eval/scripts/step_kernels.py $R/trace.json.gz --min-ms 2 > $R/step-kernels.txt 2>&1; head -40 $R/step-kernels.txt; pk
left=$(( ${BUDGET:-470} - ($(date +%s)-t0) )); [ $left -gt 30 ] && timeout $left .gpu/bin/ulysses calibrate --backend cuda --only ulysses-kernels --profile $PF --profile-out $R/$PF.yaml \
  --json $R/calibration.json > $R/calibrate-kernels.txt 2>&1; echo "calibrate rc $? $(el)"; head -30 $R/calibrate-kernels.txt; pk
echo "total $(el)"
