#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD_DIR (built with -DULYSSES_FUZZ=ON) for SECONDS each, from a
# scratch copy of its seed corpus (tests/fuzz/corpus/<target>/; the repository is not modified).
# A crash, sanitizer report, escaped exception, hang (-timeout 10 s per input) or memory blow-up
# (-rss_limit_mb 2048) fails the run; the reproducing input is kept under BUILD_DIR/fuzz-findings/.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]       (make fuzz FUZZ_SECONDS=600)
# With FUZZ_RUNS=N in the environment each target runs N inputs from seed 1 instead (make test: the
# same inputs on every machine, so that what lands does not depend on a random draw; SECONDS then
# only bounds the time)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
seconds="$2"
shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(scenario model profile sweep validation_set accelerate_config deepspeed_config record calibration_raw argv)
scratch="$(mktemp -d "${TMPDIR:-/tmp}/ulysses-fuzz-run.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd "$root"   # seeds of fuzz_argv name files relative to the repository
failed=()
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built"; failed+=("$t"); continue; }
  mkdir -p "$scratch/$t/corpus" "$scratch/$t/artifacts"
  cp -r "$root/tests/fuzz/corpus/$t/." "$scratch/$t/corpus/"
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  budget=(-max_total_time="$seconds")
  [ -n "${FUZZ_RUNS:-}" ] && budget=(-runs="$FUZZ_RUNS" -seed=1 -max_total_time="$seconds")
  "$bin" "$scratch/$t/corpus" "${dict[@]}" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
         -max_len=65536 -print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" >"$scratch/$t/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t/log" | grep -o '[0-9]*$' | tail -1)
  if [ $rc -ne 0 ]; then
    mkdir -p "$build/fuzz-findings/$t"
    cp "$scratch/$t/artifacts/"* "$build/fuzz-findings/$t/" 2>/dev/null
    echo "fuzz_$t: FAILED (exit $rc, ${execs:-?} executions); inputs kept in $build/fuzz-findings/$t/; log:"
    grep -v '^#[0-9]' "$scratch/$t/log" | tail -40
    failed+=("$t")
  else
    echo "fuzz_$t: clean, ${execs:-?} executions${FUZZ_RUNS:+ (seed 1)}"
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets clean"
