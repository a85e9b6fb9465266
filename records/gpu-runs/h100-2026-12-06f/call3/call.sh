#!/usr/bin/env bash
# call 10 (2026-12-06, eighth session), main with the loss head merged and bench step's power table:
# 1. [power],[loss] GPU tests; 2. bench attention at 32K/64K/128K causal 32/8 D=128: 0.3 s passes, then 4 s passes
# for ours and the peers alike (attn_peer.py --min-time-s): the rates at the power limit; 3. bench step at llama 64K tiled logits.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/c10; mkdir -p $R; t0=$(date +%s)
PF=h100-sxm-80gb; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && PF=h200-sxm-141gb; echo "profile $PF"
pk(){ tar czf /tmp/c10.tgz.part -C /tmp c10 && mv /tmp/c10.tgz.part $OUT/c10.tgz; }
mark(){ echo "$(date -u '+%Y/%m/%d %H:%M:%S.%3N') $1" >> $R/marks.txt; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 50 > $R/smi.csv 2>&1 &
smi=$!; trap 'kill $smi 2>/dev/null' EXIT
timeout 120 .gpu/bin/ulysses_gpu_tests "[power],[loss]" > $R/gpu-tests.txt 2>&1; echo "gpu tests rc $? $(( $(date +%s)-t0 )) s"; tail -2 $R/gpu-tests.txt
P=32768:32:8:128:1,65536:32:8:128:1,131072:32:8:128:1
for T in 0.3 4; do
  mark "attention-$T start"
  timeout 200 .gpu/bin/ulysses bench attention --points $P --min-time-s $T --json $R/attention-$T.json > $R/attention-$T.txt 2>&1
  echo "attention $T rc $? $(( $(date +%s)-t0 )) s"; mark "attention-$T end"; grep -A5 "^#      S" $R/attention-$T.txt; pk
done
mark "bench-step start"
OUT=$R PROFILE=$PF BENCH_CASES="llama8b-l2-tlog-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits" timeout 200 bash eval/scripts/run_alst_gpu.sh bench-step; echo "bench-step rc $? $(( $(date +%s)-t0 )) s"
mark "bench-step end"; pk
for f in $R/alst/bench-step-*.txt; do echo "== $f"; grep -E "^   (cuda|deepspeed)|ratio|cuda /" $f; done
