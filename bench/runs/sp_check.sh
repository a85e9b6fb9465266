#!/usr/bin/env bash
# One device call for the ninth session's step at sp > 1 (issue 13; docs/STEP_RUNTIME.md "The step at sp > 1"):
# the logical-rank GPU tests (tests/gpu/test_step_sp.cpp, `[sp]`) one case at a time under ULYSSES_LOOPBACK_TRACE=1
# (each collective's entry per rank on stderr); a case still running after its limit gets the GPU's utilisation and,
# where gdb exists, every thread's backtrace before it is stopped. Then the one-rank step and layer tests the change
# touches (`[step]~[sp],[layer]`). Since the tenth session also `run --backend cuda --scope step` at sp 2 (llama-3.1-8b,
# 2 layers, 32K; with --ranks-on-one-gpu on a one-GPU host; SP_CLI=0 skips it), since the eleventh also with the
# optimizer on the host and with the parameter parts there. Carry .gpu (the CUDA build of ulysses_gpu_tests and
# ulysses, staged); ~300 s.
# Results: $OUT/sp.tgz, written again after each part. Exit 1 when a part failed.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
LIMIT=${SP_CASE_LIMIT:-75}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/sp_out}; W=$(mktemp -d /tmp/sp.XXXXXX); R=$W/sp; mkdir -p "$R" "$O"
pk(){ tar czf "$W/sp.tgz.part" -C "$W" sp && mv "$W/sp.tgz.part" "$O/sp.tgz"; }
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
n=0
while IFS= read -r name; do
  n=$((n + 1)); f=$R/sp-case$n.txt
  ULYSSES_LOOPBACK_TRACE=1 .gpu/bin/ulysses_gpu_tests "$name" > $f 2>&1 &
  pid=$!; waited=0
  while kill -0 $pid 2>/dev/null && [ $waited -lt $LIMIT ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 $pid 2>/dev/null; then
    { echo "== still running after $LIMIT s"; nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv
      command -v gdb >/dev/null && timeout 30 gdb -p $pid -batch -ex "thread apply all bt" 2>&1 | head -300; } > $R/sp-case$n-stuck.txt
    kill -9 $pid; status=1
  fi
  wait $pid; rc=$?; [ $rc -eq 0 ] || status=1
  echo "case $n rc $rc $(el): $name"; grep -E "^step sp=|worst gradient|passed|failed" $f | head -6
  grep -A12 "FAILED" $f | head -30; tail -4 $f | grep "loopback rank" ; pk
  [ -s $R/sp-case$n-stuck.txt ] && { echo "stopped at the first stuck case"; break; }
done < <(.gpu/bin/ulysses_gpu_tests "[sp]" --list-test-names-only | grep -v "^$" | grep -v "test cases")
if [ "${SP_CLI:-1}" = 1 ] && [ -x .gpu/bin/ulysses ]; then  # the command at sp 2 (on one GPU: as its threads)
  n_gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l); x=""; [ "$n_gpu" -lt 2 ] && x=--ranks-on-one-gpu
  # plain, then (eleventh session) with the optimizer on the host, then with the parameter parts there too
  for tag in "" -oopt -oparams; do
    case $tag in -oopt) extra="--offload-optimizer true" ;; -oparams) extra="--offload-optimizer true --offload-params true" ;; *) extra="" ;; esac
    f=$R/cli-sp2$tag.txt
    timeout ${SP_CLI_LIMIT:-150} .gpu/bin/ulysses run --backend cuda --scope step --model llama-3.1-8b --layers 2 \
      --profile h100-sxm-80gb --attn-implementation ulysses_flash --seq-len 32768 --sp-size 2 --gpus 2 $x $extra > $f 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1; echo "run --sp-size 2 $x $extra rc $rc $(el)"; head -25 $f; pk
  done
fi
if [ "${SP_REGRESSION:-1}" = 1 ]; then
  timeout ${SP_REGRESSION_LIMIT:-200} .gpu/bin/ulysses_gpu_tests "${SP_REGRESSION_SPEC:-[step]~[sp],[layer]}" > $R/step-tests.txt 2>&1; rc=$?; [ $rc -eq 0 ] || status=1
  echo "step,layer tests rc $rc $(el)"; tail -2 $R/step-tests.txt; grep -B3 -A12 "FAILED" $R/step-tests.txt | head -40; pk
fi
echo "total $(el), status $status"; rm -rf "$W"
exit $status
