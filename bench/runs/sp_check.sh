#!/usr/bin/env bash
# One device call for the ninth session's step at sp > 1 (issue 13; docs/STEP_RUNTIME.md "The step at sp > 1"):
# the logical-rank GPU tests (tests/gpu/test_step_sp.cpp, `[sp]`), then the one-rank step and layer tests the change
# touches (`[step],[layer]`). Carry .gpu (the CUDA build of ulysses_gpu_tests, staged); ~150 s.
# Results: $OUT/sp.tgz, written again after each part. Exit 1 when a part failed.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/sp_out}; W=$(mktemp -d /tmp/sp.XXXXXX); R=$W/sp; mkdir -p "$R" "$O"
pk(){ tar czf "$W/sp.tgz.part" -C "$W" sp && mv "$W/sp.tgz.part" "$O/sp.tgz"; }
status=0; ok(){ [ "$1" -eq 0 ] || status=1; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
timeout 240 .gpu/bin/ulysses_gpu_tests "[sp]" -s > $R/sp-tests.txt 2>&1; rc=$?; ok $rc
echo "sp tests rc $rc $(el)"; grep -E "^step sp=|worst gradient|passed|failed" $R/sp-tests.txt | head -20
grep -B3 -A12 "FAILED" $R/sp-tests.txt | head -60; pk
timeout 200 .gpu/bin/ulysses_gpu_tests "[step],[layer]" > $R/step-tests.txt 2>&1; rc=$?; ok $rc
echo "step,layer tests rc $rc $(el)"; tail -2 $R/step-tests.txt; grep -B3 -A12 "FAILED" $R/step-tests.txt | head -40; pk
echo "total $(el), status $status"; rm -rf "$W"
exit $status
