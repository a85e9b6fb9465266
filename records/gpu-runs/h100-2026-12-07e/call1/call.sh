#!/usr/bin/env bash
# fourteenth session, call1
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/c1; mkdir -p $R; t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
left(){ local l=$(( 575 - $(date +%s) + t0 )); [ $l -lt 5 ] && l=5; echo $l; }
pk(){ tar czf $OUT/c1.tgz.part -C $OUT c1 && mv $OUT/c1.tgz.part $OUT/c1.tgz; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
P=h100-sxm-80gb; grep -q H200 $R/gpu.txt && P=h200-sxm-141gb; export PROFILE=$P; echo profile $P
U=.gpu/bin/ulysses; T=.gpu/bin/ulysses_gpu_tests
timeout 60 $T "run step: the SM clock of each long phase" > $R/clock-test.txt 2>&1; echo "clock test rc $? $(el)"; tail -4 $R/clock-test.txt; pk
for S in 16384 65536; do
  X=""; [ $S = 65536 ] && X="--tiled-logits"
  timeout 100 $U run --backend cuda --scope step --model llama-3.1-8b --layers 2 --profile $P --seq-len $S $X --warmup 1 --iters 3 --format json > $R/step-$S.json 2>$R/step-$S.err; echo "step json $S rc $? $(el)"; tail -3 $R/step-$S.err; pk
done
OUT=$OUT timeout 150 bash bench/runs/attn_bwd_ncu.sh > $R/ncu.log 2>&1; echo "ncu rc $? $(el)"; cat $R/ncu.log; pk
[ $P = h200-sxm-141gb ] && for i in 1 2; do timeout 60 .gpu/bin/host_adam_scan 16 9 one > $R/host_adam_one_$i.txt 2>&1; echo "host_adam_scan rc $? $(el)"; tail -4 $R/host_adam_one_$i.txt; done; pk
timeout 200 $T "[step]~[sp]" > $R/step-tests.txt 2>&1; echo "step tests rc $? $(el)"; tail -3 $R/step-tests.txt; pk
timeout 100 $T "[gpu]~[sp]~[step]~[layer]" > $R/gpu-rest.txt 2>&1; echo "gpu rest rc $? $(el)"; tail -3 $R/gpu-rest.txt; pk
timeout $(left) $U calibrate --backend cuda --only attention --profile $P --profile-out $R/cal-attn.yaml > $R/cal-attn.txt 2>&1; echo "cal rc $? $(el)"; tail -3 $R/cal-attn.txt; pk
echo done $(el)
