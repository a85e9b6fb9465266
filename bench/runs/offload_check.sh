#!/usr/bin/env bash
# One device call for the twelfth session's offload_params changes (issue 13; docs/STEP_RUNTIME.md "ZeRO-Offload"):
# 1. the GPU tests of offload_params (sp 1 against the parameters on the device, sp 2 on logical ranks against sp 1;
#    the peaks against the mirror; the two-GPU cases skip on one);
# 2. A/B of `run --scope step` with the parameters on the host, alternating the build before the change (.gpu-old:
#    fetch on the compute stream, every layer gathered twice) and after it (.gpu: fetches ahead on their own stream,
#    the last two layers kept), at llama-3.1-8b 4 layers 8K and 32K, OFFLOAD_AB_ROUNDS rounds (default 2);
# 3. `validate --scope step --set scenarios/validation/h100-step-offload.yaml` (the record; OFFLOAD_VALIDATE=0 skips).
# Carry .gpu (the CUDA build's ulysses and ulysses_gpu_tests, staged) and .gpu-old (the older ulysses, staged).
# Results: $OUT/offload.tgz, written again after each part. Exit 1 when a part failed.
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
O=${OUT:-/tmp/offload_out}; W=$(mktemp -d /tmp/off.XXXXXX); R=$W/offload; mkdir -p "$R" "$O"
pk(){ tar czf "$W/o.tgz.part" -C "$W" offload && mv "$W/o.tgz.part" "$O/offload.tgz"; }
status=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $R/gpu.txt
timeout 240 .gpu/bin/ulysses_gpu_tests "*parameters on the host*" \
  > $R/tests.txt 2>&1; rc=$?; [ $rc -eq 0 ] || status=1
echo "tests rc $rc $(el)"; grep -E "offload_params|passed|failed" $R/tests.txt | head -8; grep -A12 FAILED $R/tests.txt | head -30; pk
if [ -x .gpu-old/bin/ulysses ]; then
  for r in $(seq 1 ${OFFLOAD_AB_ROUNDS:-2}); do
    for S in 8192 32768; do
      for b in old new; do
        bin=.gpu/bin/ulysses; [ $b = old ] && bin=.gpu-old/bin/ulysses
        f=$R/ab-$b-s$S-r$r.txt
        timeout 150 $bin run --backend cuda --scope step --model llama-3.1-8b --layers 4 --profile h100-sxm-80gb \
          --attn-implementation ulysses_flash --seq-len $S --offload-optimizer true --offload-params true \
          --warmup 1 --iters 3 > $f 2>&1; rc=$?; [ $rc -eq 0 ] || status=1
        echo "ab $b S=$S round $r rc $rc $(el): $(grep -E '^step [0-9]' $f | head -1)"
        grep -E "offload.params|zero\.|optimizer.step|max_memory_allocated" $f | head -6
      done
    done
    pk
  done
fi
if [ "${OFFLOAD_VALIDATE:-1}" = 1 ]; then
  timeout ${OFFLOAD_VALIDATE_LIMIT:-420} .gpu/bin/ulysses validate --backend cuda --scope step \
    --set scenarios/validation/h100-step-offload.yaml --out $R/h100-step-offload.json --warmup 1 --iters 3 \
    > $R/validate.txt 2> $R/validate.err; rc=$?; [ $rc -eq 0 ] || status=1
  echo "validate rc $rc $(el)"; cat $R/validate.txt | head -80; tail -5 $R/validate.err; pk
fi
echo "total $(el), status $status"; rm -rf "$W"
exit $status
