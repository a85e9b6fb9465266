#!/usr/bin/env bash
# call 1 (2026-12-06 sixth session): bench step, four points, with 368640; then the host time per logits tile
set -u
t0=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
P=h100-sxm-80gb; case "$gpu" in *H200*) P=h200-sxm-141gb;; esac
mkdir -p /tmp/c1
O0=$OUT; export OUT=/tmp/c1/a; mkdir -p $OUT
PROFILE=$P bash eval/scripts/run_alst_gpu.sh bench-step
echo "bench-step done $(( $(date +%s)-t0 )) s"
tar czf /tmp/c1.tgz.part -C /tmp c1 && mv /tmp/c1.tgz.part $O0/c1.tgz
if [ $(( $(date +%s)-t0 )) -lt 330 ]; then
  export OUT=/tmp/c1/b; mkdir -p $OUT
  PROFILE=$P timeout $(( 590 - ($(date +%s)-t0) )) bash eval/scripts/run_alst_gpu.sh calibrate-tile
  echo "calibrate-tile done $(( $(date +%s)-t0 )) s"
  tar czf /tmp/c1.tgz.part -C /tmp c1 && mv /tmp/c1.tgz.part $O0/c1.tgz
fi
echo "total $(( $(date +%s)-t0 )) s"
