set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/c1; mkdir -p $R; t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $OUT/c1.tgz.part -C $OUT c1 && mv $OUT/c1.tgz.part $OUT/c1.tgz; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee $R/gpu.txt; nproc | tee -a $R/gpu.txt; lscpu | grep "Model name" | tee -a $R/gpu.txt
timeout 150 .gpu/bin/ulysses_gpu_tests "step on one rank with the parameters on the host*" > $R/onerank.txt 2>&1; echo "onerank rc $? $(el)"; grep -E "worst|peak|passed|failed|FAILED" $R/onerank.txt | tail -8; pk
timeout 120 .gpu/bin/ulysses_gpu_tests "[gpu]~[sp]~[step]~[layer]" > $R/gpu-rest.txt 2>&1; echo "gpu rest rc $? $(el)"; tail -2 $R/gpu-rest.txt; pk
timeout 150 .gpu/bin/gemm_conditions > $R/gemm_conditions.txt 2>&1; echo "gemm_conditions rc $? $(el)"; grep -E "condition|fwd.14336x4096|fwd.4096x14336" $R/gemm_conditions.txt; pk
for i in 1 2; do timeout 60 .gpu/bin/host_adam_scan 16 9 one > $R/host_adam_one_$i.txt 2>&1; echo "host_adam_scan rc $? $(el)"; tail -4 $R/host_adam_one_$i.txt; done; pk
SP_REGRESSION_LIMIT=200 OUT=$R timeout $(( 560 - $(date +%s) + t0 )) bash bench/runs/sp_check.sh > $R/sp_check.log 2>&1; echo "sp_check rc $? $(el)"; grep -E "^case|rc|total" $R/sp_check.log | tail -30; pk
