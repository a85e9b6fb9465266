#!/usr/bin/env bash
# call 0 (2026-12-06 sixth session): [gpu] + issue 14's 32 points + block P=1 (attn_targets.sh), then calibrate attention
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
bash bench/runs/attn_targets.sh .gpu/bin
echo "targets done $(( $(date +%s)-t0 )) s"
R=/tmp/c0; mkdir -p $R
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
P=h100-sxm-80gb; case "$gpu" in *H200*) P=h200-sxm-141gb;; esac
left=$(( 585 - ($(date +%s)-t0) ))
if [ $left -gt 20 ]; then
  timeout $left .gpu/bin/ulysses calibrate --backend cuda --only attention --profile $P --profile-out $R/$P.yaml --json $R/calibration.json > $R/cal.txt 2>&1; echo "cal rc $? $(( $(date +%s)-t0 )) s"; tail -3 $R/cal.txt
fi
tar czf /tmp/c0.tgz.part -C /tmp c0 && mv /tmp/c0.tgz.part $OUT/c0.tgz
echo "total $(( $(date +%s)-t0 )) s"
