#!/usr/bin/env bash
# One device call: correctness (ours, every tuning variant; the Catch2 GPU test; PyTorch flash
# on the same inputs), forward tuning-variant pick at D=64 causal 32K, the full sweep with the
# pick and the backward's per-head-dim defaults (bench/attn/run_variants.sh compares backward
# variants), and the PyTorch flash/cuDNN sweep. Logs under $OUT; short tables printed last.
# Usage (device machine, repo root): bench/attn/run_gpu.sh BIN_DIR
set -u
B=${1:?usage: run_gpu.sh BIN_DIR}
O=${OUT:-/tmp/attn_out}
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
timeout 120 "$B/attn_check" check --dump /tmp/attn_in --all-variants > "$O/check.jsonl" 2> "$O/errors.log"; echo "check rc=$?"
if [ -x "$B/ulysses_gpu_tests" ]; then
  timeout 90 "$B/ulysses_gpu_tests" "[flash]" > "$O/catch2.log" 2>&1; echo "catch2 [flash] rc=$?"; tail -3 "$O/catch2.log"
fi
for v in 0 1; do
  timeout 30 "$B/attn_check" bench --one 32768 16 16 64 1 --fwd-variant "$v" >> "$O/variants.jsonl" 2>> "$O/errors.log"
done
read -r FV < <(python3 - "$O/variants.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(max((r for r in rows if r["D"] == 64), key=lambda r: r["fwd_tflops"])["fwd_variant"])
PY
)
echo "picked fwd_variant=$FV (backward: per-head-dim defaults)"
timeout 150 "$B/attn_check" bench --fwd-variant "$FV" > "$O/bench.jsonl" 2>> "$O/errors.log"; echo "bench rc=$?"
timeout 60 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"; echo "peer check rc=$?"
timeout 200 python3 bench/peers/attn_peer.py bench > "$O/peer_bench.jsonl" 2>> "$O/errors.log"; echo "peer bench rc=$?"
python3 bench/attn/attn_table.py --fwd-variant "$FV" "$O"/check.jsonl "$O"/peer_check.jsonl \
  "$O"/bench.jsonl "$O"/peer_bench.jsonl > "$O/tables.md"
python3 - "$O/variants.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("variant f%d b%d D%d fwd %.1f bwd %.1f" % (r["fwd_variant"], r["bwd_variant"], r["D"], r["fwd_tflops"], r["bwd_tflops"]))
PY
grep -E "worst error ratio" "$O/tables.md"
sed -n '/^| S |/,$p' "$O/tables.md"
