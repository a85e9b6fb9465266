#!/usr/bin/env bash
# One device call for the TMA forms of the wgmma kernels (kernels/attention_flash_{fwd,bwd}_sm90a_tma.cuh):
#  1. attn_check's fp64 check of the TMA variants next to PyTorch flash's error on the same inputs;
#  2. A/B against the form before at D=128 points, the variants interleaved, twice;
#  3. the same points through `ulysses bench attention` (the default kernels) with PyTorch's FA2 and cuDNN.
# KIND=fwd (default): forward variants 31 (2 stages), 63 (3 stages for the full mask), 95, 127 (heads first)
# against 15 (the ping-pong form); KIND=bwd: backward variants 8192 (3 stages), 12288 (2) against 2048. TRIED and
# BASE override the variants and the one they are compared with, e.g. KIND=bwd TRIED=40960 BASE=8192 (FA3's step
# order against the default). HEAD_DIM=64 runs steps 2 and 3 at D=64 (the same S, H, mask points; step 1 checks both
# head dims always), e.g. KIND=bwd TRIED=114688 BASE=16384 HEAD_DIM=64 (FlashAttention-3's dQ path at D=64).
# SKIP_TARGETS=1 stops after step 2.
# Usage (device machine, repo root, ULYSSES_HOME=$PWD): [KIND=bwd] [TRIED=".." BASE=N] [HEAD_DIM=64]
# bench/attn/run_tma.sh BIN_DIR; results in $OUT/tma.tgz
set -u
B=${1:?usage: run_tma.sh BIN_DIR}
D=${HEAD_DIM:-128}
case $D in 64|128) ;; *) echo "run_tma.sh: HEAD_DIM must be 64 or 128" >&2; exit 2 ;; esac
O=${OUT:-/tmp/attn_out}/tma
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1
pack() {  # written beside and renamed into place: an interrupted pack never leaves a truncated tma.tgz
  tar czf "/tmp/tma.tgz.part.$$" -C "$(dirname "$O")" tma && mv "/tmp/tma.tgz.part.$$" "${OUT:-/tmp/attn_out}/tma.tgz"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
if [ "${KIND:-fwd}" = bwd ]; then flag=--bwd-variant; tried="${TRIED:-8192 12288}"; base=${BASE:-2048}; col=bwd_tflops
else flag=--fwd-variant; tried="${TRIED:-31 63 95 127}"; base=${BASE:-15}; col=fwd_tflops; fi
first=1
for v in $tried; do
  dump=(); [ $first = 1 ] && dump=(--dump /tmp/attn_in); first=0
  timeout 120 "$B/attn_check" check "${dump[@]}" $flag $v > "$O/check-$v.jsonl" 2> "$O/check-$v.err"
  echo "attn_check check $flag $v rc=$?"; tail -2 "$O/check-$v.err"
done
timeout 90 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"
echo "peer check rc=$?"
cat "$O"/check-*.jsonl > "$O/check.jsonl"
python3 bench/attn/attn_table.py "$O/check.jsonl" "$O/peer_check.jsonl" > "$O/check_tables.md" 2>> "$O/errors.log"
grep -E "worst error ratio" "$O/check_tables.md"; pack
[ "$D" = 128 ] || echo "A/B and bench attention at head dim $D"
for shape in "32768 16 16 $D 1" "32768 16 16 $D 0" "131072 32 8 $D 1" "131072 16 16 $D 0"; do
  for rep in 1 2; do
    for v in $base $tried; do
      timeout 60 "$B/attn_check" bench --one $shape $flag $v >> "$O/ab.jsonl" 2>> "$O/errors.log"
    done
  done
done
python3 - "$O/ab.jsonl" "$col" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print("A/B S=%d H=%d/%d causal=%d variants %d/%d: %s %.1f TFLOP/s" % (r["S"], r["Hq"], r["Hkv"], r["causal"],
              r["fwd_variant"], r["bwd_variant"], sys.argv[2], r[sys.argv[2]]))
PY
pack
[ "${SKIP_TARGETS:-0}" = 1 ] && exit 0
timeout 200 "$B/ulysses" bench attention --points 32K:16:16:$D:1,32K:16:16:$D:0,128K:32:8:$D:1,128K:16:16:$D:0 \
  --json "$O/targets.json" > "$O/targets.txt" 2>&1
echo "bench attention rc=$?"; tail -14 "$O/targets.txt"; pack
