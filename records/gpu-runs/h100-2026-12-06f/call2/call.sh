#!/usr/bin/env bash
# call 9 (2026-12-06, eighth session): A/B main (.gpu-main) vs wip/loss-head (.gpu) on the llama 64K tlog step,
# alternating, with power sampled; then bench attention at the step's shape sustained 5 s per pass (power cap).
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/c9; mkdir -p $R; t0=$(date +%s)
PF=h100-sxm-80gb; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && PF=h200-sxm-141gb; echo "profile $PF"
pk(){ tar czf /tmp/c9.tgz.part -C /tmp c9 && mv /tmp/c9.tgz.part $OUT/c9.tgz; }
mark(){ echo "$(date -u '+%Y/%m/%d %H:%M:%S.%3N') $1" >> $R/marks.txt; }
nvidia-smi -q -d POWER,CLOCK > $R/smi-q.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 50 > $R/smi.csv 2>&1 &
smi=$!; trap 'kill $smi 2>/dev/null' EXIT
timeout 60 .gpu/bin/ulysses_gpu_tests "[power]" -s > $R/power-test.txt 2>&1; echo "power test rc $?"; grep -E "SM clock|passed|failed" $R/power-test.txt
for i in 1 2 3; do for v in main branch; do
  B=.gpu/bin/ulysses; [ $v = main ] && B=.gpu-main/bin/ulysses
  mark "$v$i start"
  timeout 80 $B compare --backend cuda --scope step --model llama-3.1-8b --profile $PF --gpus 1 --sp-size 1 \
    --layers 2 --seq-len 65536 --tiled-logits --warmup 1 --iters 3 --format json > $R/$v$i.json 2> $R/$v$i.err
  echo "$v$i rc $? $(( $(date +%s)-t0 )) s"; mark "$v$i end"
done; pk; done
mark "bench-step start"
OUT=$R PROFILE=$PF BENCH_CASES="llama8b-l2-tlog-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits" \
  timeout 240 bash eval/scripts/run_alst_gpu.sh bench-step; echo "bench-step rc $? $(( $(date +%s)-t0 )) s"
mark "bench-step end"; pk
mark "attention start"
timeout 150 .gpu/bin/ulysses bench attention --points 65536:32:8:128:1 --min-time-s 5 --json $R/attention.json > $R/attention.txt 2>&1
echo "attention rc $? $(( $(date +%s)-t0 )) s"; mark "attention end"; tail -12 $R/attention.txt; pk
python3 - <<'P'
import json
for v in ('main','branch'):
    for i in (1,2,3):
        try:
            d=json.load(open(f'/tmp/c9/{v}{i}.json')); print(v,i,'step ms %.2f'%(d['step']['measured']*1e3),
              ' '.join('%s %.1f'%(p['name'],p['measured']*1e3) for p in d['phases'] if p['name'] in ('logits','mlp.bwd','attn.bwd','attn.fwd','attn.recompute')))
        except Exception as e: print(v,i,'fail',e)
P
