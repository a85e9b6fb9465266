#!/usr/bin/env bash
# One device call for a change of the attention defaults (kernels/attention_flash_defaults.hpp):
#  1. the GPU tests over the compiled-in defaults (ulysses_gpu_tests "[gpu],[flash]");
#  2. attn_check's fp64 check of the forward variants named in FWD (default 191: the TMA form with its D=64
#     instance) next to PyTorch flash's error on the same inputs;
#  3. `ulysses bench attention` (the defaults) with PyTorch's FA2 and cuDNN on the issue's points at the head
#     dims in DIMS (default "64"; "64 128" for both: ~150 s each).
# Usage (device machine, repo root, ULYSSES_HOME=$PWD): [FWD="191"] [DIMS="64 128"] bench/attn/run_defaults.sh BIN_DIR
# Results in $OUT/defaults.tgz.
set -u
B=${1:?usage: run_defaults.sh BIN_DIR}
O=${OUT:-/tmp/attn_out}/defaults
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1
pack() { tar czf "${OUT:-/tmp/attn_out}/defaults.tgz" -C "$(dirname "$O")" defaults; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
timeout 300 "$B/ulysses_gpu_tests" "[gpu],[flash]" > "$O/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?"; grep -E "^SKIPPED|FAILED|passed|failed" "$O/gpu-tests.txt" | tail -12; pack
first=1
for v in ${FWD:-191}; do
  dump=(); [ $first = 1 ] && dump=(--dump /tmp/attn_in); first=0
  timeout 120 "$B/attn_check" check "${dump[@]}" --fwd-variant "$v" > "$O/check-$v.jsonl" 2> "$O/check-$v.err"
  echo "attn_check check --fwd-variant $v rc=$?"; tail -2 "$O/check-$v.err"
done
timeout 90 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"
echo "peer check rc=$?"
cat "$O"/check-*.jsonl > "$O/check.jsonl"
python3 bench/attn/attn_table.py "$O/check.jsonl" "$O/peer_check.jsonl" > "$O/check_tables.md" 2>> "$O/errors.log"
grep -E "worst error ratio" "$O/check_tables.md"; pack
for d in ${DIMS:-64}; do
  pts=""
  for c in 1 0; do for s in 32K 128K; do for hh in 16:16 16:8 32:32 32:8; do pts="$pts,$s:$hh:$d:$c"; done; done; done
  timeout 240 "$B/ulysses" bench attention --points "${pts#,}" --json "$O/targets-d$d.json" > "$O/targets-d$d.txt" 2>&1
  echo "bench attention D=$d rc=$?"; tail -20 "$O/targets-d$d.txt"; pack
done
