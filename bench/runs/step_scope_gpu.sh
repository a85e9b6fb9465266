#!/usr/bin/env bash
# One device call for issue 13's whole step on our runtime: the GPU tests (the step runner against its
# fp64 oracle and its memory mirror, then all of "[gpu]"), `bench layer` at llama 32K, `calibrate
# --backend cuda --only ulysses-kernels` (our kernels' rates into a copy of the h200 profile, step.tgz:
# h200-ulysses.yaml), and `compare --backend cuda --scope step` with that profile on llama-3.1-8b
# shapes with 2 layers over the sequence lengths and plans given.
# Carry the staged folder (../shared/tools/stage-for-gpu.sh .gpu build-cuda/cli/ulysses build-cuda/tests/ulysses_gpu_tests).
# Results in $OUT/step.tgz. Usage (device machine, repo root): bench/runs/step_scope_gpu.sh BIN_DIR [S ...]
set -u
bin=${1:?usage: step_scope_gpu.sh BIN_DIR [S ...]}; shift
lens=("$@"); [ ${#lens[@]} -eq 0 ] && lens=(16384 32768 65536)
O=${OUT:-/tmp/step_out}/step; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 ULYSSES_HOME=$PWD LD_LIBRARY_PATH=$PWD/$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv > "$O/nvidia-smi.csv"
t0=$(date +%s)
timeout 200 "$bin/bin/ulysses_gpu_tests" "[step]" -s > "$O/gpu-tests-step.txt" 2>&1; echo "step tests rc $? ($(( $(date +%s) - t0 )) s)"
grep -E "^step|worst|passed|failed|FAILED" "$O/gpu-tests-step.txt" | head -20
timeout 240 "$bin/bin/ulysses_gpu_tests" "[gpu]" > "$O/gpu-tests.txt" 2>&1; echo "gpu tests rc $? ($(( $(date +%s) - t0 )) s)"
tail -3 "$O/gpu-tests.txt"
timeout 150 "$bin/bin/ulysses" bench layer --model llama-3.1-8b --profile h200-sxm-141gb --seq-len 32768 --gpus 1 --warmup 3 \
  --iters 10 > "$O/bench-layer-llama-3.1-8b-32768.txt" 2>&1; echo "bench layer rc $? ($(( $(date +%s) - t0 )) s)"
grep -E "rmsnorm|gemm q fwd|validation" "$O/bench-layer-llama-3.1-8b-32768.txt"
timeout 120 "$bin/bin/ulysses" calibrate --backend cuda --only ulysses-kernels --profile h200-sxm-141gb \
  --profile-out "$O/h200-ulysses.yaml" > "$O/calibrate-kernels.txt" 2>&1; echo "calibrate kernels rc $? ($(( $(date +%s) - t0 )) s)"
cat "$O/calibrate-kernels.txt" | head -20
prof="$O/h200-ulysses.yaml"; [ -s "$prof" ] || prof=h200-sxm-141gb
base="--model llama-3.1-8b --profile $prof --gpus 1 --sp-size 1 --layers 2 --attn-implementation ulysses_flash"
for S in "${lens[@]}"; do
  for tl in false true; do
    name="llama8b-l2-s${S}-tlog-${tl}"
    timeout 120 "$bin/bin/ulysses" compare --backend cuda --scope step $base --seq-len "$S" --tiled-logits "$tl" \
      --warmup 2 --iters 5 > "$O/compare-$name.txt" 2> "$O/compare-$name.err"; echo "compare $name rc $? ($(( $(date +%s) - t0 )) s)"
  done
done
name="llama8b-l2-s${lens[0]}-nockpt"  # every layer keeps its activations
timeout 120 "$bin/bin/ulysses" compare --backend cuda --scope step $base --seq-len "${lens[0]}" --activation-checkpointing false \
  --warmup 2 --iters 5 > "$O/compare-$name.txt" 2> "$O/compare-$name.err"; echo "compare $name rc $? ($(( $(date +%s) - t0 )) s)"
timeout 120 "$bin/bin/ulysses" compare --backend cuda --scope step $base --seq-len "${lens[0]}" --warmup 2 --iters 5 \
  --format json > "$O/compare-llama8b-l2-s${lens[0]}-tlog-false.json" 2> /dev/null
cat "$O/compare-llama8b-l2-s${lens[0]}-tlog-false.txt"; tail -n 3 "$O"/compare-*.err
cd "${OUT:-/tmp/step_out}" && tar czf step.tgz step && rm -rf step
