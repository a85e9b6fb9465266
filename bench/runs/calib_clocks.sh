#!/usr/bin/env bash
# One device call (docs/STEP_POWER.md "The whole record: NVML's clock per phase"): calibrate's attention and kernel
# sections with each timing's SM clock (calib/point_clocks.hpp: the forward and backward of each attention point
# apart, each GEMM point after the call that chooses its algorithm), then, on an H100, the whole-step capacity set
# (scenarios/validation/h100-step-capacity.yaml). Then, here: `ulysses validate --stored
# records/validation/h100-step.json --json RE.json; python3 eval/scripts/clock_scaled_attention.py RE.json
# cal-attn.json` for the forwards' test, and the capacity record committed beside the H200 one with a CI test.
# Usage: LIMIT=seconds (default 570) bash bench/runs/calib_clocks.sh; carry .gpu with the CUDA build's ulysses and
# kernel_conditions staged. ~80 s for the calibrations on an H100, the capacity set a few minutes.
# Results: $OUT/cc.tgz (cal-attn.*, cal-kern.*, h100-step-capacity.json, capacity.*, kc-attn.txt). Exit 1 when a
# part fails.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/calib_clocks}; R=$O/cc; mkdir -p $R; t0=$(date +%s); rc=0
left(){ echo $(( ${LIMIT:-570} - 10 - $(date +%s) + t0 )); }
el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $O/cc.tgz.part -C $O cc && mv $O/cc.tgz.part $O/cc.tgz; }
part(){ local name=$1; shift; timeout $(left) "$@"; local r=$?; echo "$name rc $r $(el)"; [ $r -eq 0 ] || rc=1; pk; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
P=h100-sxm-80gb; grep -q H200 $R/gpu.txt && P=h200-sxm-141gb
part "calibrate attention" .gpu/bin/ulysses calibrate --backend cuda --only attention --profile $P \
  --profile-out $R/cal-attn.yaml --json $R/cal-attn.json > $R/cal-attn.txt 2>&1
grep "SM clock" $R/cal-attn.txt
part "calibrate kernels" .gpu/bin/ulysses calibrate --backend cuda --only ulysses-kernels --profile $P \
  --profile-out $R/cal-kern.yaml --json $R/cal-kern.json > $R/cal-kern.txt 2>&1
grep "SM clock" $R/cal-kern.txt
if [ "$P" = h100-sxm-80gb ]; then
  part capacity .gpu/bin/ulysses capacity --backend cuda --scope step --set scenarios/validation/h100-step-capacity.yaml \
    --out $R/h100-step-capacity.json > $R/capacity.txt 2> $R/capacity.err
  tail -10 $R/capacity.txt
fi
part kernel_conditions .gpu/bin/kernel_conditions attn burst 16384 > $R/kc-attn.txt 2>&1
echo "done $(el), rc $rc"
exit $rc
