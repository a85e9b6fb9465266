#!/usr/bin/env bash
# One device call: correctness of every tuning variant, then variants side by side at D=128
# (and D=64 for the forward) causal 32K/128K, then the best pick and PyTorch flash/cuDNN at the
# issue's target points (D=128, causal, S=32K and 128K, H=16, Hkv 16 and 8).
# Usage (device machine, repo root): bench/attn/run_variants.sh BIN_DIR
set -u
B=${1:?usage: run_variants.sh BIN_DIR}
O=${OUT:-/tmp/attn_out}
mkdir -p "$O"
export PYTHONUNBUFFERED=1
timeout 120 "$B/attn_check" check --all-variants > "$O/check.jsonl" 2> "$O/errors.log"; echo "check rc=$?"
for fb in "1 1" "1 8" "1 9" "3 1"; do
  set -- $fb
  timeout 30 "$B/attn_check" bench --one 32768 16 16 128 1 --fwd-variant "$1" --bwd-variant "$2" >> "$O/variants.jsonl" 2>> "$O/errors.log"
done
for f in 1 3; do
  timeout 30 "$B/attn_check" bench --one 32768 16 16 64 1 --fwd-variant "$f" >> "$O/variants.jsonl" 2>> "$O/errors.log"
done
for fb in "1 1" "3 9"; do
  set -- $fb
  timeout 30 "$B/attn_check" bench --one 131072 16 16 128 1 --fwd-variant "$1" --bwd-variant "$2" >> "$O/variants.jsonl" 2>> "$O/errors.log"
done
read -r FV BV < <(python3 - "$O/variants.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
r32 = [r for r in rows if r["D"] == 128 and r["S"] == 32768]
bwd = max(r32, key=lambda r: r["bwd_tflops"])["bwd_variant"]
fwd128 = max(r32, key=lambda r: r["fwd_tflops"])["fwd_variant"] & 2
fwd64 = max((r for r in rows if r["D"] == 64), key=lambda r: r["fwd_tflops"])["fwd_variant"] & 2
print(1 | (fwd128 if fwd128 == fwd64 else 0), bwd)
PY
)
echo "picked fwd_variant=$FV bwd_variant=$BV"
P="--one 32768 16 16 128 1 --one 32768 16 8 128 1 --one 131072 16 16 128 1 --one 131072 16 8 128 1"
for pt in "32768 16 16 128 1" "32768 16 8 128 1" "131072 16 16 128 1" "131072 16 8 128 1"; do
  timeout 60 "$B/attn_check" bench --one $pt --fwd-variant "$FV" --bwd-variant "$BV" >> "$O/bench.jsonl" 2>> "$O/errors.log"
done
timeout 120 python3 bench/peers/attn_peer.py bench $P > "$O/peer_bench.jsonl" 2>> "$O/errors.log"; echo "peer bench rc=$?"
python3 - "$O/variants.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("variant f%d b%d S%d D%d fwd %.1f bwd %.1f" % (r["fwd_variant"], r["bwd_variant"], r["S"], r["D"], r["fwd_tflops"], r["bwd_tflops"]))
PY
python3 bench/attn/attn_table.py --fwd-variant "$FV" --bwd-variant "$BV" "$O/check.jsonl" bench/attn/results/peer_check.jsonl \
  "$O/bench.jsonl" "$O/peer_bench.jsonl" > "$O/tables.md"
grep -E "worst error ratio" "$O/tables.md"
sed -n '/^| S |/,$p' "$O/tables.md"
grep -c '"finite":false' "$O/check.jsonl"
