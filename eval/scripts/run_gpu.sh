#!/usr/bin/env bash
# One device call of the predict -> run -> compare -> calibrate loop on 2 GPUs (docs/VALIDATION.md):
# calibrate the H200 profile (written into profiles/ of this working copy and copied to $OUT;
# the full calibration, then the idle-link curve merged into it),
# then validate the set and measure capacity with the new profile. Logs and JSON under $OUT.
# Usage (device machine, repo root, LD_LIBRARY_PATH set): eval/scripts/run_gpu.sh BIN_DIR
set -u
B=${1:?usage: run_gpu.sh BIN_DIR}
O=${OUT:-/tmp/validation_out}
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$O/nvidia-smi.csv"
timeout 200 "$B/ulysses" calibrate --backend cuda --profile h200-sxm-141gb --profile-out profiles/h200-sxm-141gb.yaml \
  --json "$O/h200-calibration.json" > "$O/calibrate.log" 2>&1; echo "calibrate rc=$?"
timeout 120 "$B/ulysses" calibrate --backend cuda --only a2a-idle --profile h200-sxm-141gb \
  --profile-out profiles/h200-sxm-141gb.yaml --json "$O/h200-a2a-idle.json" > "$O/a2a-idle.log" 2>&1
echo "calibrate --only a2a-idle rc=$?"
cp profiles/h200-sxm-141gb.yaml "$O/"
timeout 200 "$B/ulysses" validate --backend cuda --set scenarios/validation/h200.yaml --out "$O/h200.json" --warmup 2 --iters 10 \
  > "$O/validate.log" 2>&1; echo "validate rc=$?"
timeout 150 "$B/ulysses" capacity --backend cuda --set scenarios/validation/h200-capacity.yaml --out "$O/h200-capacity.json" \
  > "$O/capacity.log" 2>&1; echo "capacity rc=$?"
