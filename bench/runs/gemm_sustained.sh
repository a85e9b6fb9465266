#!/usr/bin/env bash
# One device call for issue 13's power limit (docs/STEP_POWER.md; written 2026-12-07, ninth
# session; run in records/gpu-runs/h100-2026-12-07a/call2: no difference): does choosing each cuBLASLt algorithm at the board's power limit, not near the boost clock, make our step
# cheaper where the step runs at the limit? Gemm's sustained timing (runtime/cuda/gemm.hpp,
# ULYSSES_GEMM_TUNE_WINDOW_MS) against the default, alternating, our step at llama-3.1-8b 64K tiled
# logits (2 layers, warm-up 1, 3 timed steps; `compare --scope step --format json`: each run's step time, its
# phases and the energy per step from NVML's counter), after the GEMM GPU tests. ULYSSES_GEMM_TUNE_LOG=1: each sustained problem's proposals with their burst and sustained times (stderr).
# Carry .gpu (the CUDA build of ulysses and ulysses_gpu_tests, staged); ~250 s. Results: $OUT/gemm.tgz, written again
# after each part. Exit 1 when a part failed.
# Usage (device machine, repo root): bash bench/runs/gemm_sustained.sh [WINDOW_MS] [ROUNDS] (default 100 and 2)
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
WIN=${1:-100}; ROUNDS=${2:-2}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/gemm_out}; W=$(mktemp -d /tmp/gemm.XXXXXX); R=$W/gemm; mkdir -p "$R" "$O"
pk(){ tar czf "$W/gemm.tgz.part" -C "$W" gemm && mv "$W/gemm.tgz.part" "$O/gemm.tgz"; }
status=0; ok(){ [ "$1" -eq 0 ] || status=1; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
PF=h100-sxm-80gb; grep -q H200 $R/gpu.txt && PF=h200-sxm-141gb
timeout 120 .gpu/bin/ulysses_gpu_tests "[gemm]" > $R/gpu-tests.txt 2>&1; rc=$?; ok $rc
echo "gpu tests rc $rc $(el)"; tail -2 $R/gpu-tests.txt; pk
run(){  # $1 name, $2 window ms (0: the default burst timing)
  local env=(); [ "$2" != 0 ] && env=(ULYSSES_GEMM_TUNE_WINDOW_MS=$2 ULYSSES_GEMM_TUNE_LOG=1)
  env "${env[@]}" timeout 200 .gpu/bin/ulysses compare --backend cuda --scope step --profile $PF --gpus 1 --sp-size 1 \
    --layers 2 --model llama-3.1-8b --seq-len 65536 --tiled-logits --warmup 1 --iters 3 --format json > $R/$1.json 2> $R/$1.err
  local rc=$?; ok $rc; echo "$1 rc $rc $(el)"
  python3 - "$R/$1.json" <<'PY' | tee -a $R/summary.txt
import json, sys
m = json.load(open(sys.argv[1]))["measurement"]
ph = {}
for p in m["phases"]: ph[p["name"]] = ph.get(p["name"], 0) + p["median_s"] * 1e3
keys = list(ph)
print(sys.argv[1].split("/")[-1], "step %.1f ms" % (m["step_s"]["median"] * 1e3), "energy", m["energy_j_per_step"], "J/step;",
      ", ".join("%s %.1f" % (k, ph[k]) for k in sorted(keys)))
PY
  pk
}
for r in $(seq 1 $ROUNDS); do run burst-$r 0; run sustained-$r $WIN; done
echo "total $(el), status $status"; rm -rf "$W"
exit $status
