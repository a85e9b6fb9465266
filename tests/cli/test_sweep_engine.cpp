// The sweep engine (sim/sweep.hpp) called directly: incremental set-up equals applying every axis
// to the base in order, rows come back in product order, skipped points are counted by reason.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <mutex>

#include "sim/config.hpp"
#include "sim/predict.hpp"
#include "sim/sweep.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;

namespace {

SweepSpec spec_from(const std::string& axes_yaml, const ulysses::test::TempDir& dir, const std::string& mode = "predict") {
  const std::string path = dir / "spec.yaml";
  std::ofstream(path) << "name: engine\nbase: " << ulysses::test::source_path("scenarios/llama8b-h100-sp8.yaml")
                      << "\nmode: " << mode << "\naxes:\n" << axes_yaml;
  return load_sweep(path);
}

// What the point should be: every axis value applied to the base in spec order.
Scenario fresh(const SweepSpec& spec, std::int64_t index) {
  Scenario sc = spec.base;
  std::vector<std::size_t> idx(spec.axes.size());
  for (std::size_t a = spec.axes.size(); a-- > 0;) {
    idx[a] = static_cast<std::size_t>(index % static_cast<std::int64_t>(spec.axes[a].values.size()));
    index /= static_cast<std::int64_t>(spec.axes[a].values.size());
  }
  for (std::size_t a = 0; a < spec.axes.size(); ++a) set_key(sc, spec.axes[a].key, spec.axes[a].values[idx[a]], spec.path);
  return sc;
}

}  // namespace

TEST_CASE("sweep engine: each point equals the axes applied afresh, in product order", "[cli]") {
  ulysses::test::TempDir dir;
  // model after model.heads (the preset resets heads), model.layers after model (re-applied when
  // the model changes), gpus/sp (dp_shard_size auto follows)
  const SweepSpec spec = spec_from(
      "  model.heads: [16, 32]\n  model: [llama-3.1-8b, qwen3-4b]\n  model.layers: [4, 8]\n  gpus: [8, 16]\n  plan.sp_size: [2, 3, 8]\n"
      "  plan.seq_len: [65536, 131072]\n",
      dir);
  std::mutex mu;
  std::map<std::int64_t, std::string> rows;
  std::int64_t mismatches = 0;
  SweepOptions opt;
  opt.threads = 3;
  opt.chunk = 5;  // many chunks: each thread starts mid-product
  opt.row = [&](const SweepPoint& pt, std::string& out) {
    const Scenario want = fresh(spec, pt.index);
    const Scenario& got = *pt.scenario;
    const bool same = got.model.name == want.model.name && got.model.heads == want.model.heads &&
                      got.model.layers == want.model.layers &&
                      got.gpus == want.gpus && got.plan.sp_size == want.plan.sp_size &&
                      got.plan.dp_shard_size == want.plan.dp_shard_size && got.plan.seq_len == want.plan.seq_len;
    std::lock_guard lk(mu);
    mismatches += !same;
    if (pt.valid) {
      const Prediction p = predict(want);
      if (p.step_time_s != pt.prediction->step_time_s || p.gpu.total() != pt.prediction->gpu.total()) ++mismatches;
    } else if (check(want) != pt.reason) {
      ++mismatches;
    }
    rows[pt.index] = std::to_string(pt.index);
    out += std::to_string(pt.index) + "\n";
  };
  std::string text;
  opt.sink = [&](const std::string& chunk) { text += chunk; };
  const SweepStats st = run_sweep(spec, opt);
  CHECK(st.points == 2 * 2 * 2 * 2 * 3 * 2);
  CHECK(mismatches == 0);
  CHECK(rows.size() == 96);
  std::string expect;
  for (int i = 0; i < 96; ++i) expect += std::to_string(i) + "\n";
  CHECK(text == expect);  // the sink sees the chunks in product order
  std::int64_t skipped = 0;
  for (const auto& [reason, n] : st.skipped) skipped += n;
  CHECK(st.valid + skipped == st.points);
  CHECK(st.valid > 0);
  CHECK(skipped == 2 * 2 * 2 * 2 * 1 * 2);  // sp 3: 32 heads (the presets reset model.heads)
}

TEST_CASE("sweep engine in plan mode reports the longest sequence per point", "[cli]") {
  ulysses::test::TempDir dir;
  const SweepSpec spec = spec_from("  gpus: [8, 16, 32]\n  plan.sp_size: [8]\n", dir, "plan");
  std::vector<std::int64_t> longest(3, -1);
  SweepOptions opt;
  opt.threads = 2;
  opt.chunk = 1;
  opt.row = [&](const SweepPoint& pt, std::string&) { longest[static_cast<std::size_t>(pt.index)] = pt.seq_len; };
  opt.sink = [](const std::string&) {};
  const SweepStats st = run_sweep(spec, opt);
  CHECK(st.valid == 3);
  // more GPUs (dp_shard grows with ZeRO-3, sp fixed): model states shrink, so no shorter sequence
  CHECK(longest[0] > 0);
  CHECK(longest[1] >= longest[0]);
  CHECK(longest[2] >= longest[1]);
}
