// Issue 17, numbers: sizes past docs/INPUTS.md "Limits", wrapping counts, NaN targets, guessed
// options and stray words are refused in one line with exit 2 (each crashed, hung or printed a wrong
// number with exit 0 before); at the limits themselves every number stays finite and in range.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>

#include "runtime/backend_registry.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "sim/capacity.hpp"
#include "sim/checked.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/predict.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sim/fixtures.hpp"

using ulysses::test::run_cli;
using namespace ulysses;

namespace {

void refused(const std::string& args, const std::string& key) {
  INFO(args);
  const auto r = run_cli(args);
  CHECK(r.rc == 2);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.err.find(key) != std::string::npos);
  CHECK(r.out.empty());
}

const std::string kPredict = "predict --model llama-3.1-8b --seq-len 65536 ";

}  // namespace

TEST_CASE("hostile numbers: sizes past the limits are one line, exit 2", "[hostile][cli]") {
  refused(kPredict + "--micro-batch-size 9223372036854775807", "plan.micro_batch_size");
  // a token count past kMaxSeqLen is refused by parse_tokens, naming the flag
  refused("predict --model llama-3.1-8b --seq-len 9223372036854775807", "--seq-len");
  refused("predict --model llama-3.1-8b --seq-len 1099511627777", "--seq-len");
  refused(kPredict + "--micro-batch-size 16777217", "micro_batch_size * seq_len");  // B * S = 2^40 + 65536
  refused(kPredict + "--pad-to-multiple-of 9223372036854775807", "plan.pad_to_multiple_of");
  refused("predict --model llama-3.1-8b --seq-len 1099511627775 --pad-to-multiple-of 1099511627774", "plan.pad_to_multiple_of");
  refused("plan --model llama-3.1-8b --gpus 9223372036854775807", "gpus");
  refused(kPredict + "--host-mem-GiB 1e300", "at most 2^30");  // "must be positive (got -9.2e18)" before (int64 wrap)
  refused("plan --model llama-3.1-8b --granularity 9223372036854775807", "granularity");
  refused("plan --model llama-3.1-8b --gpus 8 --sp-size 8 --granularity 1099511627775", "granularity");  // lcm past 2^40
}

TEST_CASE("hostile numbers: run counts, seeds and targets", "[hostile][cli]") {
  const std::string run = "run --backend cpu --scenario '" + ulysses::test::source_path("scenarios/cpu-tiny.yaml") + "' ";
  refused(run + "--warmup 2147483647", "--warmup");  // was a crash (exit 139)
  refused(run + "--iters 1001", "--iters");
  refused(run + "--seed -1", "--seed");                // wrapped to 2^64 - 1 before
  refused(run + "--seed 1e3", "--seed");
  refused(run + "--seed 9223372036854775808", "--seed");
  const std::string stored = "validate --stored '" + ulysses::test::record_path("validation/h200.json") + "' ";
  refused(stored + "--max-error-pct nan", "--max-error-pct");  // accepted before: "max |error| <= nan%"
  refused(stored + "--max-median-error-pct inf", "--max-median-error-pct");
  refused("capacity --stored '" + ulysses::test::record_path("validation/h200-capacity.json") + "' --max-error-pct nan",
          "--max-error-pct");
}

TEST_CASE("hostile numbers: threads", "[hostile][cli]") {
  ulysses::test::TempDir dir;
  refused("sweep '" + ulysses::test::source_path("scenarios/sweep-main.yaml") + "' --threads 2000 --out '" + (dir / "o") + "'",
          "--threads");
  // the cpu backend runs one thread per rank: a model with 2048 heads on 2048 ranks is refused before any thread starts
  {
    std::ofstream m(dir / "m.yaml");
    m << "name: wide\nlayers: 1\nhidden: 2048\nheads: 2048\nkv_heads: 2048\nhead_dim: 1\nffn_hidden: 64\nvocab: 64\n"
         "tied_embeddings: true\nsource: test\n";
  }
  refused("run --backend cpu --profile cpu-local --model '" + (dir / "m.yaml") + "' --gpus 2048 --sp-size 2048 --seq-len 2048 "
          "--zero-stage 0 --attn-implementation ulysses_reference",
          "plan.sp_size");
}

TEST_CASE("hostile numbers: the cpu backend checks host memory before it allocates", "[hostile][cli]") {
  const std::string run = "run --backend cpu --scenario '" + ulysses::test::source_path("scenarios/cpu-tiny.yaml") + "'";
  {  // a host with (as good as) no memory left: refused in one line before any allocation (was std::bad_alloc)
    setenv("ULYSSES_AVAILABLE_RAM_GiB", "0.001", 1);
    const auto r = run_cli(run);
    unsetenv("ULYSSES_AVAILABLE_RAM_GiB");
    CHECK(r.rc == 2);
    CHECK(ulysses::test::count_lines(r.err) == 1);
    CHECK(r.err.find("GiB of host memory is available") != std::string::npos);
  }
  // the estimate covers what the ranks measure
  runtime::BlockShape s;
  s.B = 1, s.S = 1024, s.H = 8, s.H_kv = 2, s.D = 64, s.P = 2;
  runtime::RunOptions o;
  o.warmup = 0, o.iters = 1;
  const runtime::Measurement m = runtime::make_backend("cpu")->run_block(s, o);
  std::int64_t sum = 0;
  for (auto b : m.peak_bytes_per_rank) sum += b;
  CHECK(runtime::cpu::memory_estimate_bytes(s) > sum);
  CHECK(runtime::cpu::available_ram_bytes() != 0);
}

TEST_CASE("hostile inputs found by the fuzzers", "[hostile][cli]") {
  // fuzz_argv: Boost's error text looped forever on a word holding its own placeholder
  refused("predict --model llama-3.1-8b '--%canonical_option%x'", "%canonical_option%");
  // fuzz_calibration_raw: a number past double's range escaped as nlohmann's out_of_range (exit 1)
  ulysses::test::TempDir dir;
  std::string raw = ulysses::test::slurp(ulysses::test::record_path("validation/h200-calibration.json"));
  const auto at = raw.find("\"gpus\": 2");
  REQUIRE(at != std::string::npos);
  raw.replace(at, 10, "\"gpus\": 5.18e99761819839");
  std::ofstream(dir / "raw.json") << raw;
  refused("calibrate --from-raw '" + (dir / "raw.json") + "' --profile h200-sxm-141gb", "raw.json");
  // fuzz_argv: a model, profile or config name longer than a file name may be made std::filesystem
  // throw filesystem_error ("File name too long"; exit 1) instead of the one line naming the key
  const std::string too_long(300, 'x');
  refused("plan --model " + too_long, "model");
  refused("plan --model llama-3.1-8b --profile " + too_long, "profile");
  refused("plan --model llama-3.1-8b --accelerate-config " + too_long + ".yaml", ".yaml");
  refused("plan --model " + too_long + ".json", "json");
}

TEST_CASE("hostile arguments: no prefix guessing, no stray words", "[hostile][cli]") {
  refused("plan --model llama-3.1-8b --gpus 4 --sp 4 --all", "--sp");  // guessed --sp-size and --all-features before
  refused("plan --model llama-3.1-8b stray", "positional");
  refused("predict --model llama-3.1-8b --seq-len 4096 extra words", "positional");
  // the full names still work
  CHECK(run_cli("plan --model llama-3.1-8b --gpus 4 --sp-size 4 --all-features").rc == 0);
}

TEST_CASE("hostile numbers: checked arithmetic", "[hostile][sim]") {
  CHECK(checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 22).value() == std::int64_t{1} << 62);
  CHECK(!checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 23));
  CHECK(!checked_mul(-(std::int64_t{1} << 62), 4));
  CHECK(!checked_add(INT64_MAX, 1));
  CHECK(checked_lcm(4, 6).value() == 12);
  CHECK(!checked_lcm(0, 6));
  CHECK(!checked_lcm(INT64_MAX, INT64_MAX - 1));
  CHECK(checked_round_up(100000, 1024).value() == 100352);
  CHECK(!checked_round_up(INT64_MAX - 5, 1024));
}

TEST_CASE("hostile numbers: at the limits every prediction is finite and in range", "[hostile][sim]") {
  ModelSpec m = test::llama31_8b();
  m.layers = kMaxLayers;
  m.vocab = kMaxVocab;
  m.ffn_hidden = kMaxFfn;
  Scenario sc = test::make_scenario(m, test::h100_sxm(), 1024, 8, kMaxSeqLen);
  sc.plan.pad_to_multiple_of = 3;  // pads 2^40 up past the limit: refused, not wrapped
  CHECK_THROWS_AS(validate(sc, "t.yaml"), core::InputError);
  sc.plan.pad_to_multiple_of = 0;
  validate(sc, "t.yaml");
  const Prediction p = predict(sc);
  CHECK(p.padded_seq_len >= sc.plan.seq_len);
  for (int i = 0; i < p.gpu.n; ++i) CHECK(p.gpu.terms[i].bytes >= 0);
  for (int i = 0; i < p.host.n; ++i) CHECK(p.host.terms[i].bytes >= 0);
  CHECK(p.gpu.total() > 0);
  CHECK(std::isfinite(p.step_time_s));
  CHECK(p.step_time_s > 0);
  for (int k = 0; k < p.step.n; ++k) CHECK((std::isfinite(p.step.phases[k].time_s) && p.step.phases[k].time_s >= 0));
  // the planner's search stays inside the bound too
  const CapacityResult r = find_max_seq_len(test::make_scenario(test::llama31_8b(), test::h100_sxm(), 8, 8, 4096), 1);
  CHECK(r.max_seq_len > 0);
  CHECK(r.max_seq_len <= kMaxSeqLen);
  CHECK_THROWS_AS(find_max_seq_len(sc, 0), core::InputError);
  CHECK_THROWS_AS(find_max_seq_len(sc, kMaxSeqLen + 1), core::InputError);
}
