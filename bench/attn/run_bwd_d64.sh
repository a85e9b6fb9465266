#!/usr/bin/env bash
# One device call for the D=64 wgmma backward (lab variants 16384, 20480; kernels/attention_flash_bwd_sm90a_d64.cuh):
#  1. attn_check's fp64 check of 16384, 20480 and the mma.sync default 1117 on the same inputs, PyTorch flash's
#     error next to them (bench/attn/attn_table.py: the error ratio, target <= 2);
#  2. A/B of the three at D=64 (S 32K / 128K, causal and full, H 16/16 and 32/8), interleaved;
#  3. with BENCH128=1: `ulysses bench attention` (the defaults) on the issue's 16 D=128 points;
#  4. with BLOCK=1: `ulysses bench block` at P=1 (S=32K H=32 H_kv=8) next to the PyTorch + SDPA peer at P=1.
# Usage (device machine, repo root, ULYSSES_HOME=$PWD): [BENCH128=1] [BLOCK=1] bench/attn/run_bwd_d64.sh BIN_DIR
# Results in $OUT/bwd64.tgz.
set -u
B=${1:?usage: run_bwd_d64.sh BIN_DIR}
O=${OUT:-/tmp/attn_out}/bwd64
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
pack() { tar czf "${OUT:-/tmp/attn_out}/bwd64.tgz" -C "$(dirname "$O")" bwd64; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
first=1
for v in 1117 16384 20480; do
  dump=(); [ $first = 1 ] && dump=(--dump /tmp/attn_in); first=0
  timeout 120 "$B/attn_check" check "${dump[@]}" --bwd-variant $v > "$O/check-$v.jsonl" 2> "$O/check-$v.err"
  echo "attn_check check --bwd-variant $v rc=$?"; tail -2 "$O/check-$v.err"
done
timeout 90 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"
echo "peer check rc=$?"
for v in 1117 16384 20480; do
  python3 bench/attn/attn_table.py "$O/check-$v.jsonl" "$O/peer_check.jsonl" > "$O/check_tables-$v.md" 2>> "$O/errors.log"
  echo "variant $v: $(grep -E 'worst error ratio' "$O/check_tables-$v.md")"
done
pack
for shape in "32768 16 16 64 1" "32768 16 16 64 0" "131072 32 8 64 1" "131072 32 8 64 0"; do
  for rep in 1 2; do
    for v in 1117 16384 20480; do
      timeout 60 "$B/attn_check" bench --one $shape --bwd-variant $v >> "$O/ab.jsonl" 2>> "$O/errors.log"
    done
  done
done
python3 - "$O/ab.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print("A/B S=%d H=%d/%d D=%d causal=%d bwd %d: %.1f TFLOP/s" % (r["S"], r["Hq"], r["Hkv"], r["D"], r["causal"],
              r["bwd_variant"], r["bwd_tflops"]))
PY
pack
if [ "${BENCH128:-0}" = 1 ]; then
  pts=""
  for c in 1 0; do for s in 32K 128K; do for hh in 16:16 16:8 32:32 32:8; do pts="$pts,$s:$hh:128:$c"; done; done; done
  timeout 240 "$B/ulysses" bench attention --points "${pts#,}" --json "$O/targets-d128.json" > "$O/targets-d128.txt" 2>&1
  echo "bench attention D=128 rc=$?"; tail -8 "$O/targets-d128.txt"; pack
fi
if [ "${BLOCK:-0}" = 1 ]; then
  timeout 120 torchrun --nproc_per_node 1 bench/peers/ulysses_peer.py --seq-len 32768 --heads 32 --kv-heads 8 --head-dim 128 \
    > "$O/peer-block.json" 2> "$O/peer-block.err"; echo "block peer rc=$?"
  timeout 120 "$B/ulysses" bench block --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --seq-len 32768 \
    --peer "$O/peer-block.json" > "$O/bench-block-p1.txt" 2>&1; echo "bench block P=1 rc=$?"
  grep -E "fwd\+bwd|PyTorch|attn\." "$O/bench-block-p1.txt" | head -12; pack
fi
