#!/usr/bin/env bash
# One device call of the deepspeed backend's validation (docs/VALIDATION.md "Whole steps").
# Carry .gpu (the staged ulysses binary, ../shared/tools/stage-for-gpu.sh .gpu build/cli/ulysses) and
# .alst (runtime/deepspeed/fetch-stack.sh .alst/wheels). Results land in $OUT/alst.tgz.
# Usage: eval/scripts/run_alst_gpu.sh validate|rest|capacity|compare|diagnose|alloc-trace|ballast-history|calibrate|calibrate-tile|fused|finish|bench-step
# bench-step needs the CUDA build's ulysses staged in .gpu (stage-for-gpu.sh .gpu build-cuda/cli/ulysses).
# PROFILE (bench-step, calibrate-tile): the profile of the predictions next to the measurement, or the one the
# calibration is added to (default h200-sxm-141gb).
set -u
cd "$(dirname "$0")/../.."
mode=${1:?validate|rest|capacity|compare|diagnose|alloc-trace|ballast-history|calibrate|calibrate-tile|fused|finish|bench-step}
export NCCL_NVLS_ENABLE=0 TORCH_EXTENSIONS_DIR=/tmp/alst-ext ULYSSES_HOME=$PWD ULYSSES_DEEPSPEED_SITE=/tmp/alst-site
export LD_LIBRARY_PATH=$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}
bin=$PWD/.gpu/bin/ulysses
r=$OUT/alst; mkdir -p $r
t0=$(date +%s)
[ -d /tmp/alst-site/deepspeed ] || bash runtime/deepspeed/install-stack.sh .alst/wheels /tmp/alst-site > $r/install.log 2>&1
echo "install rc $? $(( $(date +%s) - t0 )) s"; tail -1 $r/install.log 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv > $r/nvidia-smi.csv
case $mode in
  bench-step)  # issue 13: our runtime's step next to the deepspeed backend's, same scenario, one call each
    # (docs/STEP_RUNTIME.md "bench step"); BENCH_CASES overrides: "name=flags;name=flags"
    IFS=';' read -ra cases <<< "${BENCH_CASES:-llama8b-l2-s16k=--model llama-3.1-8b --seq-len 16384;llama8b-l2-tlog-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits;llama8b-l2-all-s64k=--model llama-3.1-8b --seq-len 65536 --tiled-logits --tiled-mlp --offload-checkpoints --offload-optimizer;qwen3-4b-l2-tlog-s32k=--model qwen3-4b --seq-len 32768 --tiled-logits}"
    for c in "${cases[@]}"; do
      name=${c%%=*}; flags=${c#*=}
      # shellcheck disable=SC2086
      timeout 240 $bin bench step --backends cuda,deepspeed --profile ${PROFILE:-h200-sxm-141gb} --gpus 1 --sp-size 1 --layers 2 \
        --attn-implementation sdpa $flags --warmup 1 --iters 3 --json $r/bench-step-$name.json > $r/bench-step-$name.txt \
        2> $r/bench-step-$name.err
      echo "$name rc $? $(( $(date +%s) - t0 )) s"; tail -12 $r/bench-step-$name.txt; grep -v Warning $r/bench-step-$name.err | tail -3
      (cd $OUT && tar czf alst.tgz alst)
    done ;;
  validate)
    timeout 540 $bin validate --backend deepspeed --set scenarios/validation/h200-alst.yaml --warmup 1 --iters 2 \
      --out $r/h200-alst.json > $r/validate.log 2> $r/validate.err; echo "validate rc $?"
    tail -45 $r/validate.log; grep -v Warning $r/validate.err | grep -E '^\[|case|error' | tail -20 ;;
  rest)  # the validation cases a first call did not reach, then the capacity set
    timeout 200 $bin validate --backend deepspeed --set scenarios/validation/h200-alst.yaml --warmup 1 --iters 2 \
      --case qwen3-8b-l3-ckoff-s64k --case qwen3-8b-l4-all-s96k --out $r/h200-alst-2.json > $r/validate.log 2> $r/validate.err
    echo "validate rc $?"; grep -E '^\[' $r/validate.err
    timeout 330 $bin capacity --backend deepspeed --granularity 512 --set scenarios/validation/h200-alst-capacity.yaml \
      --out $r/h200-alst-capacity.json > $r/capacity.log 2> $r/capacity.err; echo "capacity rc $?"
    cat $r/capacity.log; grep -E '^case|error' $r/capacity.err | tail -20 ;;
  capacity)
    timeout 560 $bin capacity --backend deepspeed --granularity 512 --set scenarios/validation/h200-alst-capacity.yaml \
      --out $r/h200-alst-capacity.json > $r/capacity.log 2> $r/capacity.err; echo "capacity rc $?"
    cat $r/capacity.log; grep -E '^case|error' $r/capacity.err | tail -20 ;;
  compare)
    timeout 300 $bin compare --backend deepspeed --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --layers 2 \
      --seq-len 65536 --attn-implementation sdpa --tiled-logits --tiled-mlp --offload-checkpoints --offload-optimizer \
      --trace $r/compare-trace.json --format json > $r/compare.json 2> $r/compare.err; echo "compare rc $?" ;;
  diagnose)  # compare (worker check), the allocator's history of four cases, the fixed costs
    timeout 150 $bin compare --backend deepspeed --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --layers 2 \
      --seq-len 65536 --attn-implementation sdpa --tiled-logits --tiled-mlp --offload-checkpoints --offload-optimizer \
      --trace $r/compare-trace.json --format json > $r/compare.json 2> $r/compare.err; echo "compare rc $?"
    for c in llama8b-l2-tlog-s32k llama8b-l2-tmlp-s64k llama8b-l2-all-s96k qwen3-4b-l2-tmlp-s64k; do
      mkdir -p $r/wd-$c
      TMPDIR=$r/wd-$c ULYSSES_KEEP_WORKDIR=1 ULYSSES_MEMORY_HISTORY=$r/hist-$c timeout 120 $bin validate --backend deepspeed \
        --set scenarios/validation/h200-alst.yaml --case $c --warmup 1 --iters 1 --out $r/diag-$c.json > $r/diag-$c.log 2>&1
      echo "$c rc $? $(( $(date +%s) - t0 )) s"
    done
    timeout 120 $bin calibrate --backend deepspeed --profile h200-sxm-141gb --profile-out $r/h200-sxm-141gb.yaml \
      > $r/calibrate.log 2>&1; echo "calibrate rc $?"; tail -5 $r/calibrate.log ;;
  alloc-trace)  # the allocator's own record of eight validation cases, as replay traces for the
    # allocator simulation's check (docs/MODEL.md "Reserved memory"); one warm-up and one timed step each;
    # ALLOC_TRACE_TIMES=1: each allocation and free also carries the host clock (the GPU's lag behind the host)
    for c in ${ALLOC_TRACE_CASES:-llama8b-l2-none-s16k llama8b-l2-tlog-s32k llama8b-l2-tmlp-s64k llama8b-l2-all-s96k \
             qwen3-4b-l2-none-s16k qwen3-4b-l2-tlog-s48k qwen3-8b-l3-ckoff-s64k qwen3-4b-l2-all-s128k}; do
      ULYSSES_MEMORY_HISTORY=$r/hist-$c timeout 150 $bin validate --backend deepspeed \
        --set scenarios/validation/h200-alst.yaml --case $c --warmup 1 --iters 1 --out $r/trace-$c.json > $r/trace-$c.log 2>&1
      echo "$c rc $? $(( $(date +%s) - t0 )) s"
      for f in $r/hist-$c*.pickle; do
        [ -f "$f" ] || continue
        python3 eval/scripts/allocator_history.py $f --growths 12 --frames ${ALLOC_TRACE_FRAMES:-4} --trace $r/trace-$c.txt \
          --trace-frames-min ${ALLOC_TRACE_FRAMES_MIN:-16777216} ${ALLOC_TRACE_TIMES:+--trace-times} > $r/hist-$c.txt 2>&1
        echo "history $c rc $?"; rm -f $f
      done
    done ;;
  ballast-history)  # the allocator's history of a capacity probe under its ballast (issue 12: the
    # llama8b-l2-tlog-tmlp-ckoff case; each bisection round is one worker, the last one's history stays)
    c=llama8b-l2-tlog-tmlp-ckoff
    { sed -n '/^name:/,/^cases:/p' scenarios/validation/h200-alst-capacity.yaml; grep -- "- {name: $c," scenarios/validation/h200-alst-capacity.yaml; } > $r/set-$c.yaml
    ULYSSES_MEMORY_HISTORY=$r/hist-ballast timeout 400 $bin capacity --backend deepspeed --granularity 512 \
      --set $r/set-$c.yaml --out $r/capacity-$c.json > $r/capacity.log 2> $r/capacity.err
    echo "capacity rc $?"; cat $r/capacity.log; grep -E '^case|error' $r/capacity.err | tail -5
    for f in $r/hist-ballast*.pickle; do
      python3 eval/scripts/allocator_history.py $f --growths 8 --frames 5 --blocks 80 > ${f%.pickle}.txt 2>&1; echo "history $f rc $?"
      rm -f $f
    done ;;
  calibrate)  # the fixed costs and the op bench (attention, GEMMs, eager passes, torch AdamW, CPU Adam; calib/op_fit.hpp)
    # the eager rows alone first, small: a broken op shows its traceback here in seconds
    timeout 60 python3 -c "import sys, json; sys.path.insert(0, 'runtime/deepspeed'); from ulysses_worker import opbench
m = dict(heads=32, kv_heads=8, head_dim=128, hidden=4096, ffn_hidden=14336, vocab=128256, qk_norm=False, qkv_bias=False)
print(json.dumps(opbench.eager(m, [2048, 4096])))" > $r/eager-smoke.log 2>&1; echo "eager smoke rc $?"; tail -3 $r/eager-smoke.log | cut -c1-600
    # and ZeRO-3's step on a small stack (builds CPU Adam once for the calibrate below)
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1) PYTHONPATH=/tmp/alst-site timeout 240 python3 -c "
import sys, json; sys.path.insert(0, 'runtime/deepspeed'); from ulysses_worker import opbench
print(json.dumps(opbench.zero_step(dict(torch_adam=True), 1024, 8, 1024)))" > $r/zero-smoke.log 2>&1
    echo "zero smoke rc $?"; grep -E "^\[|Error|error" $r/zero-smoke.log | tail -4 | cut -c1-600
    timeout 420 $bin calibrate --backend deepspeed --profile h200-sxm-141gb --profile-out $r/h200-sxm-141gb.yaml \
      > $r/calibrate.log 2> $r/calibrate.err; echo "calibrate rc $?"; cat $r/calibrate.log; grep -iE "error|Traceback" $r/calibrate.err | tail -5 ;;
  calibrate-tile)  # the host's time per logits tile (calibrated.pytorch_host_logits_tile_ms; docs/MODEL.md "The
    # offloaded checkpoints' frees"): the set-up step with tiled logits alone, 2 layers, no op bench; the worker's
    # directory kept under $OUT (its log, when it fails)
    mkdir -p $r/wd
    TMPDIR=$r/wd ULYSSES_KEEP_WORKDIR=1 timeout 240 $bin calibrate --backend deepspeed --profile ${PROFILE:-h200-sxm-141gb} \
      --layers 2 --tiled-logits --op-seq-lens none --op-adam-params 0 --op-cpu-adam-params 0 \
      --profile-out $r/${PROFILE:-h200-sxm-141gb}.yaml > $r/calibrate-tile.log 2> $r/calibrate-tile.err
    echo "calibrate rc $?"; cat $r/calibrate-tile.log | grep -v "^ *provenance"; grep -iE "error|Traceback" $r/calibrate-tile.err | tail -5
    grep -h "pytorch_host_logits_tile" $r/${PROFILE:-h200-sxm-141gb}.yaml 2>/dev/null ;;
  fused)  # the op bench with its FusedAdam row (calibrate), then FusedAdam's whole step next to the model
    # predicting it with the profile that calibrate just wrote (plan.torch_adam false: DeepSpeed's default)
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29612 TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1) PYTHONPATH=/tmp/alst-site timeout 300 python3 -c "
import sys, json; sys.path.insert(0, 'runtime/deepspeed'); from ulysses_worker import opbench
print(json.dumps(opbench.zero_step(dict(torch_adam=True), 1024, 8, 1024)))" > $r/zero-smoke.log 2>&1
    echo "zero smoke rc $?"; grep -E "^\[|Error|error" $r/zero-smoke.log | tail -4 | cut -c1-600
    timeout 330 $bin calibrate --backend deepspeed --profile h200-sxm-141gb --profile-out $r/h200-sxm-141gb.yaml \
      > $r/calibrate.log 2> $r/calibrate.err; echo "calibrate rc $?"; grep -E "zero3|adam" $r/calibrate.log
    [ -s $r/h200-sxm-141gb.yaml ] && cp $r/h200-sxm-141gb.yaml profiles/h200-sxm-141gb.yaml
    timeout 150 $bin compare --backend deepspeed --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --layers 2 \
      --seq-len 32768 --attn-implementation sdpa --tiled-logits --torch-adam=false --format json > $r/fusedadam.json \
      2> $r/fusedadam.err; echo "fusedadam compare rc $?"; tail -3 $r/fusedadam.err ;;
  finish)  # the fixed costs (calibrate), then FusedAdam (plan.torch_adam false) on one case
    timeout 150 $bin calibrate --backend deepspeed --profile h200-sxm-141gb --profile-out $r/h200-sxm-141gb.yaml \
      > $r/calibrate.log 2>&1; echo "calibrate rc $?"; tail -3 $r/calibrate.log
    timeout 300 $bin compare --backend deepspeed --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --layers 2 \
      --seq-len 32768 --attn-implementation sdpa --tiled-logits --torch-adam=false --format json > $r/fusedadam.json \
      2> $r/fusedadam.err; echo "fusedadam compare rc $?"; tail -5 $r/fusedadam.err ;;
esac
echo "total $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf alst.tgz alst && rm -rf alst
