#!/usr/bin/env bash
# One device call: Nsight Compute profiles of the default wgmma attention kernels at one of issue 14's points
# each, to see what bounds them before the next restructuring (docs/ATTENTION.md "Next steps"): the D=128 backward
# (40960), the D=64 backward (16384) and the TMA forward at 32K full (the forward's weakest point). Full section
# set with source counters (per-SASS-line stall samples), clocks left alone (--clock-control none), one launch
# after two warm-ups; then the details page and the SASS source page as CSV next to each report.
# Usage (device machine, repo root; the staged folder carried): [NCU_ONLY="name ..."] bench/attn/run_ncu.sh BIN_DIR. Results: $OUT/ncu.tgz.
set -u
B=${1:?usage: run_ncu.sh BIN_DIR}
root=${OUT:-/tmp/attn_out}; O=$root/ncu; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bin=$B; [ -x "$B/bin/attn_check" ] && bin=$B/bin
pack() { (cd "$root" && tar czf ncu.tgz.part ncu && mv ncu.tgz.part ncu.tgz); }
command -v ncu > /dev/null || { echo "ncu not found" | tee "$O/errors.log"; pack; exit 1; }
# name  kernel-name regex  attn_check bench --one "S H H_kv D causal"  variant flags
while read -r name regex shape flags; do
  [ -n "${NCU_ONLY:-}" ] && [[ " $NCU_ONLY " != *" $name "* ]] && continue  # NCU_ONLY="bwd128 bwd64": those cases only
  # shellcheck disable=SC2086
  timeout 170 ncu --clock-control none --set full --import-source yes --kernel-name-base demangled --kernel-name "regex:$regex" --launch-skip 2 \
    --launch-count 1 -o "$O/$name" -f "$bin/attn_check" bench --one ${shape//,/ } ${flags//,/ } > "$O/$name.log" 2>&1
  echo "$name rc $?"; tail -3 "$O/$name.log"
  if [ -s "$O/$name.ncu-rep" ]; then
    ncu --import "$O/$name.ncu-rep" --page details --csv > "$O/$name-details.csv" 2>> "$O/errors.log"
    ncu --import "$O/$name.ncu-rep" --page source --csv --print-source sass > "$O/$name-sass.csv" 2>> "$O/errors.log"
    grep -E '"(Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|L1/TEX Hit Rate)"' \
      "$O/$name-details.csv" | cut -d, -f12-16 | head -8
  fi
  pack
done <<'CASES'
bwd128 bwd_kernel_sm90a 32768,16,16,128,1 --bwd-variant,40960
bwd64 bwd_kernel 32768,16,16,64,1 --bwd-variant,16384
fwd128full fwd_kernel_sm90a 32768,32,8,128,0 --bwd-variant,40960
CASES
