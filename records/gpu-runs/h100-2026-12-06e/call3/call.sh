#!/usr/bin/env bash
# call 2 (2026-12-06 sixth session). H200: issue 14's 32 points + block P=1 (attn_targets.sh, no tests: they passed on
# the H100 with the same binary), calibrate attention. Any GPU: the block record's P=1 cases with the profile of this
# card (calibrated in this call on an H200, committed on an H100), and the block at P=1 next to its peer, 3 rounds.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
R=/tmp/c2; mkdir -p $R
pk(){ tar czf /tmp/c2.tgz.part -C /tmp c2 && mv /tmp/c2.tgz.part $OUT/c2.tgz; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > $R/gpu.txt
P=h100-sxm-80gb; case "$gpu" in *H200*) P=h200-sxm-141gb;; esac
if [ $P = h200-sxm-141gb ]; then
  OUT=$R SKIP_TESTS=1 bash bench/runs/attn_targets.sh .gpu/bin; echo "targets $(el)"; pk
  timeout 40 .gpu/bin/ulysses calibrate --backend cuda --only attention --profile $P --profile-out $R/$P.yaml --json $R/calibration.json > $R/cal.txt 2>&1; echo "cal rc $? $(el)"
  [ -s $R/$P.yaml ] && cp $R/$P.yaml profiles/$P.yaml; pk
fi
cases=$(grep -o "name: [a-z0-9x-]*-p1-[a-z0-9-]*" scenarios/validation/h200.yaml | sed "s/name: /--case /" | tr "\n" " ")
timeout 150 .gpu/bin/ulysses validate --backend cuda --set scenarios/validation/h200.yaml $cases --profile $P --out $R/block-p1-$P.json --warmup 2 --iters 10 > $R/validate.txt 2>&1; echo "validate rc $? $(el)"; tail -30 $R/validate.txt; pk
for i in 1 2 3; do
  [ $(( $(date +%s)-t0 )) -gt 480 ] && break
  timeout 60 torchrun --nproc_per_node 1 bench/peers/ulysses_peer.py --seq-len 32768 > $R/peer-$i.json 2> $R/peer-$i.err
  timeout 60 .gpu/bin/ulysses bench block --model llama-3.1-8b --profile $P --gpus 1 --sp-size 1 --seq-len 32768 --peer $R/peer-$i.json > $R/block-$i.txt 2>&1
  echo "round $i $(el)"; grep -E "^block fwd|cudnn" $R/block-$i.txt; pk
done
echo "total $(el)"
