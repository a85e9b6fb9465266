// eval/ for the attention block, called directly: the error convention, the statistics and targets of
// a validation, a stored record re-predicted, compare's prediction of the kernel that ran, and the
// predicted longest S of `capacity`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "eval/block_capacity.hpp"
#include "eval/block_compare.hpp"
#include "eval/block_validation.hpp"
#include "eval/record_in.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using ulysses::test::record_path;
using ulysses::test::slurp;

namespace {
// A case with the given block predictions and measurements (seconds), at P.
eval::CaseResult fake_case(const std::string& name, std::int64_t P, double pred, double meas, bool correct = true) {
  eval::CaseResult r;
  r.name = name;
  r.sc.plan.sp_size = P;
  for (int k = 0; k < 6; ++k) r.p.block[k] = pred, r.m.phase_s[k] = meas;
  r.predicted_peak_bytes = 100;
  r.m.peak_bytes = 100;
  r.m.correct = correct;
  return r;
}

bool has_line(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("block error convention: (predicted - measured) / measured, nothing measured is 1e9", "[eval][validate]") {
  CHECK(eval::block_error_pct(110, 100) == Approx(10));
  CHECK(eval::block_error_pct(90, 100) == Approx(-10));
  CHECK(eval::block_error_pct(0, 0) == 0);
  CHECK(eval::block_error_pct(1, 0) == 1e9);
}

TEST_CASE("error statistics: median and max of |error|, signed mean, worst case", "[eval][validate]") {
  const eval::ErrorStats e{"x", {-4, 2, 10, -1}, {"a", "b", "c", "d"}};
  CHECK(e.median_abs() == Approx(3));  // |.| = 1 2 4 10
  CHECK(e.max_abs() == Approx(10));
  CHECK(e.mean_signed() == Approx(7.0 / 4));
  CHECK(e.worst_case() == "c");
  const eval::ErrorStats none{"y", {}, {}};
  CHECK(none.median_abs() == 0);
  CHECK(none.worst_case().empty());
}

TEST_CASE("summarize: exchanges at P = 1 are not scored, targets name what they miss", "[eval][validate]") {
  const std::vector<eval::CaseResult> cs = {fake_case("p1", 1, 1.1, 1.0), fake_case("p2", 2, 1.2, 1.0)};
  const eval::Summary s = eval::summarize(cs);
  REQUIRE(s.phases.size() == 6);
  CHECK(s.phases[0].errors_pct.size() == 1);  // a2a.qkv.fwd: only the P = 2 case
  CHECK(s.phases[1].errors_pct.size() == 2);  // attn.fwd: both
  CHECK(s.all_phases.errors_pct.size() == 2 + 6);
  CHECK(s.block_total.errors_pct.size() == 2);
  CHECK(s.block_total.errors_pct[1] == Approx(20));
  CHECK(s.incorrect == 0);
  CHECK(eval::missed_targets(s, {25, 25, 3}).empty());
  const auto missed = eval::missed_targets(s, {5, 15, 3});
  CHECK(has_line(missed, "attn.fwd: median |error| 15.00% > 5%"));
  CHECK(has_line(missed, "a2a.qkv.fwd: max |error| 20.00% > 15% (case p2)"));
  CHECK(eval::missed_targets(s, {-1, -1, -1}).empty());  // every target off
  const eval::Summary bad = eval::summarize({fake_case("wrong", 2, 1, 1, false)});
  CHECK(eval::missed_targets(bad, {-1, -1, -1}) == std::vector<std::string>{"1 case(s) failed a correctness check"});
}

TEST_CASE("the block peak is predicted under the backend's allocation policy", "[eval][validate]") {
  Prediction p;
  p.block_peak_bytes = 10, p.block_peak_bytes_freeing = 7;
  CHECK(eval::predicted_block_peak(p, "cpu") == 7);
  CHECK(eval::predicted_block_peak(p, "cuda") == 10);
}

TEST_CASE("a stored block record re-predicts, a drifted measurement misses its target", "[eval][validate]") {
  const std::string path = record_path("validation/h200.json");
  reports::Json j = eval::load_record(path, "ulysses validate --out");
  // the profile the run used: pinned beside the record (its attention curves those of the kernels that ran)
  const std::string profile = eval::stored_profile(j, path).name;
  CHECK(profile.find("h200-sxm-141gb-2026-11-30.yaml") != std::string::npos);
  const auto cases = eval::repredict_block_record(j, path, profile);
  REQUIRE(cases.size() == j["cases"].size());
  CHECK(cases[0].p.block[1] == Approx(predict(cases[0].sc).block[1]));
  CHECK(cases[0].m.phase_s[1] == j["cases"][0]["phases"][1]["measured_s"].get<double>());
  CHECK_FALSE(has_line(eval::missed_targets(eval::summarize(cases), {}), "attn.fwd"));
  // pretend attention forward ran 30 % faster than it did: the model now over-predicts it
  for (auto& c : j["cases"]) c["phases"][1]["measured_s"] = c["phases"][1]["measured_s"].get<double>() / 1.3;
  const auto drift = eval::repredict_block_record(j, path, profile);
  CHECK(has_line(eval::missed_targets(eval::summarize(drift), {}), "attn.fwd"));
  // a case that is not one: one InputError naming the case
  j["cases"][2]["phases"][0]["name"] = "attn.fwd";
  CHECK_THROWS_WITH(eval::repredict_block_record(j, path, profile), Catch::Contains("cases[2]"));
}

TEST_CASE("stored records: a missing or wrong field is one InputError naming file and key", "[eval][validate]") {
  ulysses::test::TempDir dir;
  std::ofstream(dir / "empty.json") << "{}";
  CHECK_THROWS_AS(eval::load_record(dir / "empty.json", "ulysses validate --out"), core::InputError);
  CHECK_THROWS_WITH(eval::load_record(dir / "empty.json", "ulysses validate --out"), Catch::Contains("cases"));
  reports::Json j = reports::Json::parse(slurp(record_path("validation/h200.json")));
  j["cases"][1]["peak_memory"]["measured_bytes"] = "many";
  std::ofstream(dir / "bad.json") << j.dump();
  CHECK_THROWS_WITH(eval::load_record(dir / "bad.json", "ulysses validate --out"), Catch::Contains("measured_bytes"));
}

TEST_CASE("compare predicts the kernel that ran, and the planned scenario only once", "[eval][compare]") {
  Scenario sc;
  sc.model = load_model("llama-3.1-8b");
  sc.hw = load_profile("h200-sxm-141gb");
  sc.plan.seq_len = 8192;
  sc.plan.attn_implementation = "flash_attention_2";
  const Prediction planned = predict(sc);
  runtime::Measurement m;
  m.backend = "cuda";
  m.attn_kernel = "flash_attention_2";  // ran as planned: the prediction made before the run is the one
  Prediction marked = planned;
  marked.step_time_s = -1;  // a marker: a fresh predict() would not carry it
  eval::AsRun same = eval::prediction_as_run(sc, marked, m);
  CHECK(same.note.empty());
  CHECK(same.p.step_time_s == -1);
  CHECK(same.sc.plan.attn_implementation == "flash_attention_2");
  m.attn_kernel = "ulysses_flash";  // ran as another kernel: predicted as that one
  const eval::AsRun other = eval::prediction_as_run(sc, marked, m);
  CHECK(other.sc.plan.attn_implementation == "ulysses_flash");
  CHECK(other.p.step_time_s > 0);
  CHECK(other.note.find("ran as ulysses_flash") != std::string::npos);
  m.attn_kernel.clear();  // not reported: as planned
  CHECK(eval::prediction_as_run(sc, marked, m).p.step_time_s == -1);
}

TEST_CASE("block comparison: per phase, block total and peak under the backend's policy", "[eval][compare]") {
  Scenario sc;
  sc.name = "t";
  Prediction p;
  runtime::Measurement m;
  m.backend = "cpu";
  for (int k = 0; k < 6; ++k) {
    p.block[k] = 0.001 * (k + 1);
    m.phases.push_back({std::string(core::kBlockPhaseNames[k]), 0.001, 0.0009, 0.0011});
  }
  p.block_peak_bytes = 2000, p.block_peak_bytes_freeing = 1100;
  m.peak_bytes_per_rank = {900, 1000};
  const reports::Json j = eval::block_comparison_json(sc, p, m);
  REQUIRE(j["phases"].size() == 6);
  CHECK(j["phases"][2]["error_pct"].get<double>() == Approx(200));
  CHECK(j["block_total"]["predicted_s"].get<double>() == Approx(0.021));
  CHECK(j["block_total"]["error_pct"].get<double>() == Approx((0.021 - 0.006) / 0.006 * 100));
  CHECK(j["peak_memory"]["predicted_bytes"] == 1100);  // cpu: each buffer freed after its last use
  CHECK(j["peak_memory"]["measured_bytes"] == 1000);   // max over ranks
  CHECK(j["peak_memory"]["error_pct"].get<double>() == Approx(10));
  const std::string table = eval::block_comparison_table(sc, j);
  CHECK(table.find("block total") != std::string::npos);
  CHECK(table.find("+200.0") != std::string::npos);
}

TEST_CASE("capacity: the predicted longest S is the largest multiple of g whose block fits", "[eval][capacity]") {
  Scenario sc;
  sc.model = load_model("llama-3.1-8b");
  sc.hw = load_profile("h200-sxm-141gb");
  sc.plan.sp_size = 2;
  sc.gpus = 2;
  const std::int64_t g = 4096;
  const std::int64_t S = eval::predicted_max_S(sc, g);
  REQUIRE(S > 0);
  CHECK(S % g == 0);
  const auto peak = [&](std::int64_t s) {
    Scenario x = sc;
    x.plan.seq_len = s;
    return predict(x).block_peak_bytes;
  };
  CHECK(peak(S) <= eval::usable_bytes(sc));
  CHECK(peak(S + g) > eval::usable_bytes(sc));
  CHECK(eval::usable_bytes(sc) < sc.hw.hbm_bytes);
  eval::BlockCapacityCase c;
  c.name = "c";
  c.sc = sc;
  c.predicted_S = 1030, c.measured_S = 1000;
  CHECK(eval::capacity_error_pct(c) == Approx(3));
  CHECK(eval::missed_block_capacity({c}, 3.5).empty());
  CHECK(eval::missed_block_capacity({c}, 2.5).size() == 1);
  c.measured_S = 0;  // not measured: missed while the target is on
  CHECK(eval::missed_block_capacity({c}, 1e12).size() == 1);
  CHECK(eval::missed_block_capacity({c}, -1).empty());
}
