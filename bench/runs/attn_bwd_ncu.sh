#!/usr/bin/env bash
# One device call (docs/STEP_POWER.md "Kernels alone, after what"): our flash attention backward at Llama-3.1-8B's
# shape, S 16K, profiled by ncu under kernel replay (clock and caches left alone), once as the lab times it alone
# (bench/ab/kernel_conditions.cpp) and once inside a whole step (`run --scope step`). The step's backward runs
# 13-29 % slower than the lab's under every condition tried. The reading to test (docs/STEP_POWER.md): the same
# work in cycles, run at the lower clock the step's mix of GEMMs and attention holds under the power limit. Equal
# elapsed cycles under replay support it; more cycles in the step mean its inputs or caches make the kernel do more. Carry .gpu with the CUDA build's ulysses and kernel_conditions staged;
# ~90 s after the start. Results: $OUT/c3.tgz (ncu-lab.txt, ncu-step.txt).
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/attn_ncu}; R=$O/c3; mkdir -p $R; t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $O/c3.tgz.part -C $O c3 && mv $O/c3.tgz.part $O/c3.tgz; }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
N="$NCU --clock-control none --cache-control none -k regex:bwd_kernel --launch-count 1 --section SpeedOfLight --section LaunchStats"
F="bwd_kernel|Duration|Cycles|SM Frequency|DRAM Throughput|Compute \(SM\)|Memory Throughput|Grid Size|Block Size|Registers"
status=0
timeout 60 $N .gpu/bin/kernel_conditions attn burst 16384 > $R/ncu-lab.txt 2>&1; rc=$?; [ $rc -eq 0 ] || status=1
echo "ncu lab rc $rc $(el)"; grep -E "$F" $R/ncu-lab.txt | head -14; pk
timeout 80 $N .gpu/bin/ulysses run --backend cuda --scope step --model llama-3.1-8b --layers 2 --profile ${PROFILE:-h100-sxm-80gb} \
  --attn-implementation ulysses_flash --seq-len 16384 --warmup 0 --iters 1 > $R/ncu-step.txt 2>&1; rc=$?; [ $rc -eq 0 ] || status=1
echo "ncu step rc $rc $(el)"; grep -E "$F" $R/ncu-step.txt | head -14; pk
exit $status
