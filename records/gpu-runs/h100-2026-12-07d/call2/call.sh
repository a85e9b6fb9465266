set -u
export ULYSSES_HOME=$PWD NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/c2; mkdir -p $R; t0=$(date +%s); el(){ echo "$(( $(date +%s)-t0 )) s"; }
pk(){ tar czf $OUT/c2.tgz.part -C $OUT c2 && mv $OUT/c2.tgz.part $OUT/c2.tgz; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee $R/gpu.txt
timeout 120 .gpu/bin/kernel_conditions attn > $R/attn_conditions.txt 2>&1; echo "attn rc $? $(el)"; cat $R/attn_conditions.txt; pk
timeout 120 .gpu/bin/kernel_conditions attn idle:20,burst,warm:30 > $R/attn_conditions_2.txt 2>&1; echo "attn2 rc $? $(el)"; cat $R/attn_conditions_2.txt; pk
timeout 150 .gpu/bin/kernel_conditions gemm burst,warm:30,idle:20 16384,65536 > $R/gemm_conditions_2.txt 2>&1; echo "gemm rc $? $(el)"; grep -E "condition|fwd.14336|fwd.4096x14336" $R/gemm_conditions_2.txt; pk
timeout 120 .gpu/bin/ulysses calibrate --backend cuda --only attention --profile h100-sxm-80gb --profile-out $R/cal-attn.yaml --json $R/cal-attn.json > $R/cal-attn.txt 2>&1; echo "calibrate attention rc $? $(el)"; tail -5 $R/cal-attn.txt; pk
