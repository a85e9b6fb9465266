#!/usr/bin/env bash
# One device call for backward tuning: correctness of every backward variant (fp64 reference,
# PyTorch flash on the same inputs), then the variants side by side at the target points with
# PyTorch flash (FA2) and cuDNN timed in the same call. Logs under $OUT; a short table last.
# Usage (device machine, repo root): bench/attn/run_variants.sh BIN_DIR [CHECK(0|1)] [CATCH2(0|1)]
#   env V128 / V128L / V64 / V64L: bwd variants timed at D=128 32K, D=128 128K (and 32K Hkv=8),
#   D=64 32K, D=64 128K
set -u
B=${1:?usage: run_variants.sh BIN_DIR [CHECK] [CATCH2]}
DO_CHECK=${2:-1}
DO_CATCH2=${3:-0}
O=${OUT:-/tmp/attn_out}
mkdir -p "$O" /tmp/attn_in
export PYTHONUNBUFFERED=1
V128=${V128:-"1 5 9 13 15 45 77 109"}
V128L=${V128L:-"1 13 77 109"}
V64=${V64:-"1 13 29 61 93 125"}
V64L=${V64L:-""}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$O/gpu.txt"
if [ "$DO_CHECK" = 1 ]; then
  timeout 240 "$B/attn_check" check --dump /tmp/attn_in --all-variants > "$O/check.jsonl" 2>> "$O/errors.log"
  echo "check rc=$?"
  timeout 60 python3 bench/peers/attn_peer.py check /tmp/attn_in > "$O/peer_check.jsonl" 2>> "$O/errors.log"
  echo "peer check rc=$?"
fi
if [ "$DO_CATCH2" = 1 ]; then  # env CATCH2_BINS: test binaries (other compiled-in defaults) to run too
  for t in "$B/ulysses_gpu_tests" ${CATCH2_BINS:-}; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    timeout 60 "$t" "[flash]" > "$O/catch2_$n.log" 2>&1; echo "catch2 [flash] $n rc=$?"; tail -2 "$O/catch2_$n.log"
  done
fi
one() { timeout 60 "$B/attn_check" bench --one "$@" >> "$O/variants.jsonl" 2>> "$O/errors.log"; }
for v in $V128; do one 32768 16 16 128 1 --bwd-variant "$v"; done
for v in $V128L; do one 131072 16 16 128 1 --bwd-variant "$v"; one 32768 16 8 128 1 --bwd-variant "$v"; done
for v in $V64; do one 32768 16 16 64 1 --bwd-variant "$v"; done
for v in $V64L; do one 131072 16 16 64 1 --bwd-variant "$v"; done
timeout 150 python3 bench/peers/attn_peer.py bench --one 32768 16 16 128 1 --one 131072 16 16 128 1 \
  --one 32768 16 8 128 1 --one 32768 16 16 64 1 --one 131072 16 16 64 1 > "$O/peer_variants.jsonl" 2>> "$O/errors.log"
echo "peer bench rc=$?"
for v in $V128; do one 32768 16 16 128 1 --bwd-variant "$v"; done  # again: drift within the call
python3 - "$O" <<'PY'
import json, os, sys
o = sys.argv[1]
def rows(name):
    p = os.path.join(o, name)
    return [json.loads(l) for l in open(p) if l.startswith("{")] if os.path.exists(p) else []
peer = {(r["S"], r["Hkv"], r["D"], r["impl"]): r for r in rows("peer_variants.jsonl") if "bwd_tflops" in r}
for r in rows("variants.jsonl"):
    f = peer.get((r["S"], r["Hkv"], r["D"], "torch_flash"))
    c = peer.get((r["S"], r["Hkv"], r["D"], "torch_cudnn"))
    print("S=%dK Hkv=%d D=%d bwd_variant %2d: fwd %.1f bwd %.1f | FA2 bwd %s -> %s | cuDNN bwd %s" % (
        r["S"] // 1024, r["Hkv"], r["D"], r["bwd_variant"], r["fwd_tflops"], r["bwd_tflops"],
        f and f["bwd_tflops"], f and "%.3f" % (r["bwd_tflops"] / f["bwd_tflops"]), c and c["bwd_tflops"]))
chk, pc = rows("check.jsonl"), {r["case"]: r for r in rows("peer_check.jsonl")}
per = {}
for r in chk:
    w = per.setdefault(r["bwd_variant"], [0, 0, 0.0])
    w[0] += 1
    w[1] += 0 if r["finite"] else 1
    p = pc.get(r["case"])
    if p:
        for x in ("o", "lse", "dq", "dk", "dv"):
            w[2] = max(w[2], r["err_" + x] / max(p["err_" + x], 1e-6))
for v, (n, bad, worst) in sorted(per.items()):
    print("check bwd_variant %2d: %d cases, %d not finite, worst error ratio vs torch flash %.2f" % (v, n, bad, worst))
PY
