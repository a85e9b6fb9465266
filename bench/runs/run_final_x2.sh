#!/usr/bin/env bash
# One device call on 2 GPUs after a kernel change: bench/exchange/run_gpu.sh (GPU tests, exchange
# and block benchmarks with the PyTorch peers, compare) then eval/scripts/run_gpu.sh
# (calibrate, validate, capacity). Everything is packed into $OUT/final.tgz (a device call
# returns only a few files).  Usage (device machine, repo root): bench/runs/run_final_x2.sh BIN_DIR
set -u
B=${1:?usage: run_final_x2.sh BIN_DIR}
O=${OUT:-/tmp/final_out}
mkdir -p "$O/exchange" "$O/validation"
OUT="$O/exchange" bash bench/exchange/run_gpu.sh "$B"
echo "== validation"
OUT="$O/validation" bash eval/scripts/run_gpu.sh "$B"
tar czf "$O/final.tgz" -C "$O" exchange validation
grep -E "median|max|target|passed|failed" "$O/validation/validate.log" | tail -12
tail -4 "$O/validation/capacity.log"
