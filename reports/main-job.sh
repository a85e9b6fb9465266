#!/usr/bin/env bash
# The main job (`make run`, after the build): capacity plans for Llama-3.1-8B and -70B on 1..64
# H100 and H200 GPUs with the ALST feature ablations, the main sweep, plan tables, and the report
# (PNG plots + Markdown summary) in out/. Prints the Markdown summary last. Any failing step
# stops the job with a non-zero exit.
#   usage: reports/main-job.sh [BUILD_DIR]   (default: build)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
BIN="$BUILD/cli/ulysses"
[ -x "$BIN" ] || { echo "main-job: $BIN not found (build first: make build)" >&2; exit 1; }
cd "$ROOT"
OUT=out
rm -rf "$OUT/plans" "$OUT/sweep" "$OUT/tables" "$OUT/report"
mkdir -p "$OUT/plans" "$OUT/sweep" "$OUT/tables" "$OUT/report"
start=$(date +%s.%N)

# Feature ablations, cumulative as in the ALST paper. The baseline is ZeRO-3 data parallelism
# with activation checkpointing (no sp, no offload); the next four are the feature rungs of
# sim/rungs.hpp by name (`--features`, cumulative: ulysses = sp auto); "all" is --all-features
# (the best set of every rung, searched; see `ulysses plan --help`).
ablations=(baseline tiled_logits ulysses tiled_mlp ckpt_offload all)
flags_for() {
  case "$1" in
    baseline) echo "--sp-size 1" ;;
    all)      echo "--all-features" ;;
    *)        local list="" ab
              for ab in "${ablations[@]:1}"; do  # the rungs up to and including $1
                list="${list:+$list,}$ab"
                [ "$ab" = "$1" ] && break
              done
              echo "--features $list" ;;
  esac
}

echo "== plans: feature ablations (JSON in $OUT/plans)" >&2
n=0
for model in llama-3.1-8b llama-3.1-70b; do
  for profile in h100-sxm-80gb h200-sxm-141gb; do
    for gpus in 1 2 4 8 16 32 64; do
      for i in "${!ablations[@]}"; do  # file names sort in ablation order (the report keeps it)
        ab=${ablations[$i]}
        # shellcheck disable=SC2046
        "$BIN" plan --model "$model" --profile "$profile" --gpus "$gpus" $(flags_for "$ab") \
          --label "$ab" --format json > "$OUT/plans/${model}_${profile}_$(printf %02d "$gpus")gpu_${i}_${ab}.json"
        n=$((n + 1))
      done
    done
  done
done
echo "   $n plans" >&2

echo "== plan tables (text in $OUT/tables)" >&2
for gpus in 1 8 32; do
  for ab in baseline all; do
    # shellcheck disable=SC2046
    "$BIN" plan --model llama-3.1-8b --profile h100-sxm-80gb --gpus "$gpus" $(flags_for "$ab") \
      --label "$ab" > "$OUT/tables/plan_llama-3.1-8b_h100_${gpus}gpu_${ab}.txt"
  done
done
"$BIN" predict --scenario scenarios/llama8b-h100-sp8.yaml > "$OUT/tables/predict_llama8b-h100-sp8.txt"
"$BIN" predict --scenario scenarios/llama8b-h100-sp8.yaml --format json > "$OUT/plans/predict_llama8b-h100-sp8.json"

echo "== sweeps (CSV + summary in $OUT/sweep)" >&2
for spec in scenarios/sweep-main.yaml scenarios/sweep-llama8b-plan-gpus.yaml; do
  [ -f "$spec" ] || continue
  "$BIN" sweep "$spec" --out "$OUT/sweep" >&2
done

echo "== report ($OUT/report)" >&2
note="Feature ablations (cumulative, left to right): baseline = ZeRO-3 data parallelism with activation \
checkpointing; tiled_logits = + tiled logits/loss; ulysses = + Ulysses SP over the largest sp size the GPUs and \
heads allow; tiled_mlp = + TiledMLP; ckpt_offload = + checkpoints offloaded to host; all = \`--all-features\` \
(the best set of these rungs plus optimizer and parameter offload: the longest sequence, searched). Predictions of the cost model (docs/MODEL.md), \
uncalibrated unless the profile has a calibrated section."
"$BIN" report "$OUT/plans" "$OUT/sweep" --out "$OUT/report" --title "ulysses main job" --note "$note" > "$OUT/report/stdout.md"
end=$(date +%s.%N)
echo "== main job done in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s; tables in $OUT/tables; summary $OUT/report/summary.md (plots beside it)" >&2
echo
cat "$OUT/report/summary.md"
