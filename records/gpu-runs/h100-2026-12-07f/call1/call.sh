#!/usr/bin/env bash
# fifteenth session, call1: the clock test on the new pci_bus_id, the H100 plain-step validation set with each
# phase's SM clock (on an H200: its profile, the host optimizer's rate first), then calibrate's attention and
# kernels with each point's SM clock (calib/point_clocks.hpp), as time allows
set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/c1; mkdir -p $R; t0=$(date +%s)
left(){ echo $(( ${LIMIT:-570} - 10 - $(date +%s) + t0 )); }
el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $OUT/c1.tgz.part -C $OUT c1 && mv $OUT/c1.tgz.part $OUT/c1.tgz; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; nproc >> $R/gpu.txt; lscpu | grep "Model name" >> $R/gpu.txt; cat $R/gpu.txt
P=h100-sxm-80gb; N=h100-step
timeout 60 .gpu/bin/ulysses_gpu_tests "run step: the SM clock of each long phase" > $R/clock-test.txt 2>&1; echo "clock test rc $? $(el)"; tail -3 $R/clock-test.txt
if grep -q H200 $R/gpu.txt; then
  P=h200-sxm-141gb; N=h100-step-on-h200
  for i in 1 2; do timeout 60 .gpu/bin/host_adam_scan 16 9 one > $R/host_adam_one_$i.txt 2>&1; echo "host_adam_scan rc $?"; tail -4 $R/host_adam_one_$i.txt; done
fi
pk
timeout $(left) .gpu/bin/ulysses validate --backend cuda --scope step --set scenarios/validation/h100-step.yaml --profile $P --out $R/$N.json --warmup 0 --iters 3 > $R/validate.txt 2> $R/validate.err
echo "validate rc $? $(el)"; tail -40 $R/validate.txt; tail -5 $R/validate.err; pk
if [ $(left) -gt 100 ]; then
  timeout $(left) .gpu/bin/ulysses calibrate --backend cuda --only attention --profile $P --profile-out $R/cal-attn.yaml --json $R/cal-attn.json > $R/cal-attn.txt 2>&1
  echo "cal attn rc $? $(el)"; grep -A3 "SM clock" $R/cal-attn.txt | head; tail -2 $R/cal-attn.txt; pk
fi
if [ $(left) -gt 120 ]; then
  timeout $(left) .gpu/bin/ulysses calibrate --backend cuda --only ulysses-kernels --profile $P --profile-out $R/cal-kern.yaml --json $R/cal-kern.json > $R/cal-kern.txt 2>&1
  echo "cal kern rc $? $(el)"; grep "SM clock" $R/cal-kern.txt; tail -2 $R/cal-kern.txt; pk
fi
echo "done $(el)"
