#!/usr/bin/env bash
# One device call after a change that must not change the GPU figures: the GPU tests of the new build,
# then the same attention and block figures from the old and the new binary (bench/ab/ab_binaries.py).
# Carry both staged folders (../shared/tools/stage-for-gpu.sh DIR build/cli/ulysses build/tests/ulysses_gpu_tests).
# Results (logs, ab.json) in $OUT/ab.tgz. Usage (device machine, repo root): bench/runs/ab_check.sh OLD_DIR NEW_DIR
set -u
old=${1:?usage: ab_check.sh OLD_DIR NEW_DIR}; new=${2:?usage: ab_check.sh OLD_DIR NEW_DIR}
O=${OUT:-/tmp/ab_out}/ab; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 ULYSSES_HOME=$PWD LD_LIBRARY_PATH=$PWD/$new/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv > "$O/nvidia-smi.csv"
t0=$(date +%s)
timeout 240 "$new/bin/ulysses_gpu_tests" "[gpu],[flash]" > "$O/gpu-tests.txt" 2>&1; echo "gpu tests rc $? ($(( $(date +%s) - t0 )) s)"
tail -4 "$O/gpu-tests.txt"
grep -E "FAILED|SKIPPED" "$O/gpu-tests.txt" | sort | uniq -c | head -12
timeout 300 python3 bench/ab/ab_binaries.py "$old/bin/ulysses" "$new/bin/ulysses" --rounds 3 --json "$O/ab.json" \
  > "$O/ab.txt" 2> "$O/ab.err"; echo "ab rc $? ($(( $(date +%s) - t0 )) s)"
cat "$O/ab.txt"; tail -5 "$O/ab.err"
cd "${OUT:-/tmp/ab_out}" && tar czf ab.tgz ab && rm -rf ab
