#!/usr/bin/env bash
# One device call for the wgmma kernels (forward variant 3, backward variant 2048;
# attention_flash_{fwd,bwd}_sm90a.cu):
#  1. Catch2 [flash] with both as the D=128 defaults;
#  2. attn_check's fp64 check of both next to PyTorch flash's error on the same inputs;
#  3. A/B against the mma.sync kernels (fwd 1, bwd 525) at D=128 causal 32K H=16 (attn_check bench);
#  4. the issue's D=128 causal target points (32K, 128K; H 16/32; Hkv H/8) through
#     `ulysses bench attention` with the PyTorch FA2/cuDNN peers in the same call.
# Usage (device machine, repo root, ULYSSES_HOME=$PWD): bench/attn/run_sm90a.sh BIN_DIR
#   SKIP_TARGETS=1: steps 1-3 only; AB_EXTRA="S H HKV D CAUSAL": one more A/B shape
# Everything lands in $OUT/sm90a.tgz (only a few files come back from a device call).
set -u
B=${1:?usage: run_sm90a.sh BIN_DIR}
O=${OUT:-/tmp/attn_out}/sm90a
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$B/attn_check" > "$O/attn_check.sass" 2>&1
  echo "HGMMA instructions in attn_check: $(grep -c HGMMA "$O/attn_check.sass")"
fi
timeout 180 "$B/ulysses_gpu_tests" "[flash]" > "$O/catch2.log" 2>&1; echo "catch2 [flash] rc=$?"; tail -3 "$O/catch2.log"
timeout 120 "$B/attn_check" check --dump /tmp/attn_in --fwd-variant 3 --bwd-variant 2048 > "$O/check.jsonl" 2> "$O/errors.log"
echo "attn_check check (fwd 3, bwd 2048) rc=$?"
timeout 120 "$B/attn_check" check --fwd-variant 7 --bwd-variant 2048 >> "$O/check.jsonl" 2>> "$O/errors.log"
echo "attn_check check (fwd 7, bwd 2048) rc=$?"
timeout 120 "$B/attn_check" check --fwd-variant 15 --bwd-variant 2048 >> "$O/check.jsonl" 2>> "$O/errors.log"
echo "attn_check check (fwd 15, bwd 2048) rc=$?"
timeout 90 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"
echo "peer check rc=$?"
python3 bench/attn/attn_table.py "$O/check.jsonl" "$O/peer_check.jsonl" > "$O/check_tables.md" 2>> "$O/errors.log"
grep -E "worst error ratio" "$O/check_tables.md"
for shape in "32768 16 16 128 1" "4096 16 16 128 1" "32768 16 16 128 0" ${AB_EXTRA:+"$AB_EXTRA"}; do
  for fb in "1 525" "7 2048" "15 2048" "1 525" "7 2048" "15 2048"; do
    set -- $fb
    timeout 60 "$B/attn_check" bench --one $shape --fwd-variant "$1" --bwd-variant "$2" >> "$O/ab.jsonl" 2>> "$O/errors.log"
  done
done
python3 - "$O/ab.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print("A/B S=%d causal=%d fwd_variant %d bwd_variant %d: fwd %.1f bwd %.1f TFLOP/s" % (
            r["S"], r["causal"], r["fwd_variant"], r["bwd_variant"], r["fwd_tflops"], r["bwd_tflops"]))
PY
if [ "${SKIP_TARGETS:-0}" = 1 ]; then  # A/B only
  tar czf "${OUT:-/tmp/attn_out}/sm90a.tgz" -C "$(dirname "$O")" sm90a
  exit 0
fi
P=32K:16:16:128:1,32K:16:8:128:1,32K:32:32:128:1,32K:32:8:128:1,128K:16:16:128:1,128K:16:8:128:1,128K:32:32:128:1,128K:32:8:128:1
timeout 300 "$B/ulysses" bench attention --points "$P" --json "$O/targets.json" --csv "$O/targets.csv" > "$O/targets.txt" 2>&1
echo "bench attention targets rc=$?"
tar czf "${OUT:-/tmp/attn_out}/sm90a.tgz" -C "$(dirname "$O")" sm90a
tail -25 "$O/targets.txt"
