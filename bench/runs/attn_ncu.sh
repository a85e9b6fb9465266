#!/usr/bin/env bash
# One device call (docs/STEP_POWER.md "Kernels alone, after what"): our flash attention kernels at Llama-3.1-8B's
# shape profiled by ncu under kernel replay (clock and caches left alone), once as the lab times them alone
# (bench/ab/kernel_conditions.cpp) and once inside a whole step (`run --scope step`, 2 layers; tiled logits from 64K
# up). The test of the reading there: the same work in cycles, run at the clock the step's mix holds under the
# power limit. Equal elapsed cycles under replay support it; more cycles in the step mean its inputs or caches make
# the kernel do more. The step's time of a kernel over its cycles is then the clock it ran at.
# Usage: bash bench/runs/attn_ncu.sh [S (16384)] [kinds (bwd; fwd and/or bwd)]; PROFILE (h100-sxm-80gb).
# Carry .gpu with the CUDA build's ulysses and kernel_conditions staged; ~30 s per kind at 16K, ~60 s at 64K.
# Results: $OUT/c3.tgz (ncu-<kind>-<S>-lab.txt, ncu-<kind>-<S>-step.txt). Exit 1 when a part fails.
set -u
S=${1:-16384}; KINDS=${2:-bwd}
case "$S" in ''|*[!0-9]*|0*) echo "attn_ncu.sh: S '$S' is not a positive integer" >&2; exit 2;; esac
[ -n "${KINDS// /}" ] || { echo "attn_ncu.sh: kinds '$KINDS' names none of fwd, bwd" >&2; exit 2; }
for k in $KINDS; do case "$k" in fwd|bwd) ;; *) echo "attn_ncu.sh: kind '$k' is not fwd or bwd" >&2; exit 2;; esac; done
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/attn_ncu}; R=$O/c3; mkdir -p $R; t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $O/c3.tgz.part -C $O c3 && mv $O/c3.tgz.part $O/c3.tgz; }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
F="_kernel_sm90|Duration|Cycles|SM Frequency|DRAM Throughput|Compute \(SM\)|Memory Throughput|Grid Size|Block Size|Registers"
X=""; [ "$S" -ge 65536 ] && X="--tiled-logits"
status=0
for k in $KINDS; do
  N="$NCU --clock-control none --cache-control none -k regex:${k}_kernel_sm90 --launch-count 1 --section SpeedOfLight --section LaunchStats"
  timeout 120 $N .gpu/bin/kernel_conditions attn burst "$S" ${PROFILE:-h100-sxm-80gb} > $R/ncu-$k-$S-lab.txt 2>&1; rc=$?
  [ $rc -eq 0 ] || status=1
  echo "ncu $k lab S $S rc $rc $(el)"; grep -E "$F" $R/ncu-$k-$S-lab.txt | head -14; pk
  timeout 150 $N .gpu/bin/ulysses run --backend cuda --scope step --model llama-3.1-8b --layers 2 --profile ${PROFILE:-h100-sxm-80gb} \
    --attn-implementation ulysses_flash --seq-len "$S" $X --warmup 0 --iters 1 > $R/ncu-$k-$S-step.txt 2>&1; rc=$?
  [ $rc -eq 0 ] || status=1
  echo "ncu $k step S $S rc $rc $(el)"; grep -E "$F" $R/ncu-$k-$S-step.txt | head -14; pk
done
exit $status
