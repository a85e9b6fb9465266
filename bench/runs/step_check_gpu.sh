#!/usr/bin/env bash
# One device call for issue 13's step on our runtime: all GPU tests ("[gpu]"; the step's own first),
# `calibrate --backend cuda --only ulysses-kernels` into a copy of the profile (step/<its name>.yaml; PROFILE defaults to
# h200-sxm-141gb; CALIBRATE_ATTENTION=1 adds `--only attention` to it; SKIP_CALIBRATE=1 uses PROFILE as it is),
# then `compare --backend cuda --scope step` for each CASE, then (VALIDATE_SET set) `validate --backend cuda
# --scope step` of that set into step/record.json. Each CASE is "name=compare flags" (the model, layers,
# sequence length and plan flags; --gpus 1 --sp-size 1 and the profile are added). Results: $OUT/step.tgz,
# written again after every command (a call cut off by its time limit keeps what finished).
# Carry the staged folder (../shared/tools/stage-for-gpu.sh .gpu build-cuda/cli/ulysses build-cuda/tests/ulysses_gpu_tests).
# VALIDATE_CASES="a b": only those cases of the set (merge the parts with eval/scripts/merge_step_records.py).
# Usage (device machine, repo root): [PROFILE=name] [CALIBRATE_ATTENTION=1 | SKIP_CALIBRATE=1] [VALIDATE_SET=set.yaml
#   [VALIDATE_CASES="..."] [VALIDATE_TIMEOUT=s]] [SKIP_TESTS=1 | STEP_TESTS_ONLY=1] bench/runs/step_check_gpu.sh BIN_DIR [CASE ...]
set -u
bin=${1:?usage: step_check_gpu.sh BIN_DIR [name=compare-flags ...]}; shift
root=${OUT:-/tmp/step_out}; O=$root/step; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 ULYSSES_HOME=$PWD LD_LIBRARY_PATH=$PWD/$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
pack() { (cd "$root" && tar czf step.tgz.part step && mv step.tgz.part step.tgz); }
say() { echo "$1 ($(( $(date +%s) - t0 )) s)"; pack; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv > "$O/nvidia-smi.csv"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 150 "$bin/bin/ulysses_gpu_tests" "[step]" > "$O/gpu-tests-step.txt" 2>&1; say "step tests rc $?"
  grep -E "^step|worst|adam|passed|failed|FAILED" "$O/gpu-tests-step.txt" | head -30
  if [ -z "${STEP_TESTS_ONLY:-}" ]; then
    timeout 240 "$bin/bin/ulysses_gpu_tests" "[gpu]" > "$O/gpu-tests.txt" 2>&1; say "gpu tests rc $?"
    grep -E "FAILED|passed|failed" "$O/gpu-tests.txt" | tail -8
  fi
fi
base=${PROFILE:-h200-sxm-141gb}; prof=$base
out="$O/$(basename "${base%.yaml}").yaml"  # a preset name or a path: the calibrated copy beside the results
if [ -z "${SKIP_CALIBRATE:-}" ]; then
  timeout 300 "$bin/bin/ulysses" calibrate --backend cuda --only ulysses-kernels --profile "$base" \
    --profile-out "$out" > "$O/calibrate-kernels.txt" 2>&1; say "calibrate kernels rc $?"
  head -24 "$O/calibrate-kernels.txt"
  [ -s "$out" ] && prof="$out"
  if [ -n "${CALIBRATE_ATTENTION:-}" ] && [ -s "$out" ]; then
    timeout 300 "$bin/bin/ulysses" calibrate --backend cuda --only attention --profile "$out" \
      --profile-out "$out" > "$O/calibrate-attention.txt" 2>&1; say "calibrate attention rc $?"
    tail -4 "$O/calibrate-attention.txt"
  fi
fi
for c in "$@"; do
  name=${c%%=*}; flags=${c#*=}
  # shellcheck disable=SC2086
  timeout 150 "$bin/bin/ulysses" compare --backend cuda --scope step --profile "$prof" --gpus 1 --sp-size 1 $flags \
    --warmup 1 --iters 3 > "$O/compare-$name.txt" 2> "$O/compare-$name.err"; say "compare $name rc $?"
  grep -E "^   (attn|mlp|optimizer|step|max_memory_allocated)" "$O/compare-$name.txt"; tail -n 2 "$O/compare-$name.err"
done
if [ -n "${VALIDATE_SET:-}" ]; then
  only=(); for c in ${VALIDATE_CASES:-}; do only+=(--case "$c"); done
  timeout "${VALIDATE_TIMEOUT:-400}" "$bin/bin/ulysses" validate --backend cuda --scope step --set "$VALIDATE_SET" \
    --profile "$prof" "${only[@]}" --out "$O/record.json" --warmup 1 --iters 3 > "$O/validate.txt" 2> "$O/validate.err"
  say "validate rc $?"
  tail -n 40 "$O/validate.txt"; tail -n 5 "$O/validate.err"
fi
