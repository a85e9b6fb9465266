// Feature rungs and their searches: the rung table, --all-features never worse than any rung set
// (the issue-16 cases), the inverse search (fewest GPUs reaching a target), --explain's toggles,
// and parse_tokens.
#include <catch2/catch.hpp>

#include <chrono>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/feature_search.hpp"
#include "sim/predict.hpp"
#include "sim/tokens.hpp"

using namespace ulysses;

namespace {

// The shipped presets, as `ulysses plan --model M --profile P --gpus N --all-features` builds the base.
Scenario preset(const std::string& model, const std::string& profile, std::int64_t gpus) {
  Scenario sc;
  sc.model = load_model(model);
  sc.hw = load_profile(profile);
  sc.gpus = gpus;
  sc.plan.dp_shard_auto = true;
  sc.plan.dp_shard_size = gpus;
  sc.plan.seq_len = 1;
  REQUIRE(check(sc).empty());
  return sc;
}

std::int64_t longest(const Scenario& sc) {
  Scenario s = sc;
  s.plan.seq_len = s.plan.sp_size;
  if (!check(s).empty()) return -1;
  return find_max_seq_len(s, 1024).max_seq_len;
}

bool fits(Scenario sc, std::int64_t S) {
  sc.plan.seq_len = S;
  if (!check(sc).empty()) return false;
  const Prediction p = predict(sc);
  return p.fits_gpu && p.fits_host;
}

// The best any subset of the rungs fits at `gpus`, computed here set by set.
std::int64_t best_by_hand(const Scenario& base, std::int64_t* S_max = nullptr) {
  std::int64_t best = 0;
  for (RungSet s = 0; s <= kAllRungs; ++s) best = std::max(best, longest(with_rungs(base, s)));
  if (S_max) *S_max = best;
  return best;
}

// The main job's cumulative ladder (reports/main-job.sh): baseline, + tiled_logits, + ulysses, + tiled_mlp, + ckpt_offload.
std::vector<RungSet> ladder() {
  std::vector<RungSet> l{0};
  for (Rung r : {Rung::tiled_logits, Rung::ulysses, Rung::tiled_mlp, Rung::ckpt_offload}) l.push_back(l.back() | bit(r));
  return l;
}

}  // namespace

TEST_CASE("rungs: one table, names round-trip, bad names refused", "[sim][rungs]") {
  REQUIRE(rungs().size() == kRungCount);
  for (int i = 0; i < kRungCount; ++i) CHECK(static_cast<int>(rungs()[i].rung) == i);
  for (RungSet s = 0; s <= kAllRungs; ++s) {
    const std::string n = rung_set_name(s);
    std::string commas = n;
    std::replace(commas.begin(), commas.end(), '+', ',');
    CHECK(parse_rung_set(commas, "", "--features") == s);
  }
  CHECK_THROWS_AS(parse_rung_set("tiled", "", "--features"), core::InputError);
  CHECK_THROWS_AS(parse_rung_set("ulysses,ulysses", "", "--features"), core::InputError);
  CHECK_THROWS_AS(parse_rung_set("ulysses,", "", "--features"), core::InputError);
}

TEST_CASE("rungs: sp auto follows the head rules, with_rungs and rungs_of agree", "[sim][rungs]") {
  Scenario b8 = preset("llama-3.1-8b", "h100-sxm-80gb", 8);
  b8.plan.seq_len = 8192;
  CHECK(largest_valid_sp(b8.model, 8) == 8);
  CHECK(largest_valid_sp(b8.model, 64) == 32);  // 32 heads
  CHECK(largest_valid_sp(b8.model, 12) == 4);   // 12 does not divide 32; 6 does not either
  CHECK(largest_valid_sp(b8.model, 1) == 1);
  for (RungSet s = 0; s <= kAllRungs; ++s) {
    const Scenario sc = with_rungs(b8, s);
    CHECK(rungs_of(sc) == s);
    CHECK(sc.plan.sp_size * sc.plan.dp_shard_size == 8);
    CHECK(check(sc).empty());
  }
}

TEST_CASE("all-features: never worse than any rung set (issue 16 cases)", "[sim][rungs]") {
  struct Case { const char* model; const char* profile; std::int64_t gpus; };
  std::int64_t one_h100 = 0, two_h100 = 0;
  for (const Case c : {Case{"llama-3.1-70b", "h100-sxm-80gb", 1}, Case{"llama-3.1-70b", "h100-sxm-80gb", 2},
                       Case{"llama-3.1-70b", "h200-sxm-141gb", 16}}) {
    INFO(c.model << " on " << c.gpus << " x " << c.profile);
    const Scenario base = preset(c.model, c.profile, c.gpus);
    const RungSearch rs = search_rungs(base, kAllRungs, 1024);
    REQUIRE(rs.candidates.size() == 64);
    const std::int64_t S = rs.chosen().cap.max_seq_len;
    CHECK(S == best_by_hand(base));
    for (RungSet s : ladder()) CHECK(S >= longest(with_rungs(base, s)));
    // the chosen set's scenario gives that length, and ties go to the faster step
    CHECK(longest(with_rungs(base, rs.chosen().set)) == S);
    for (const auto& cand : rs.candidates)
      if (cand.valid() && cand.cap.max_seq_len == S) CHECK(rs.chosen().step_time_s() <= cand.step_time_s());
    if (c.gpus == 1) one_h100 = S;
    if (c.gpus == 2) two_h100 = S;
  }
  CHECK(two_h100 > one_h100);  // the issue: 299K on one H100, 1K on two (parameter offload only on one)
}

TEST_CASE("all-features: with fixed rungs it searches only the others", "[sim][rungs]") {
  Scenario base = preset("llama-3.1-8b", "h100-sxm-80gb", 8);
  base.plan.tiled_mlp = false;  // as --tiled-mlp=false
  const RungSet free = kAllRungs & ~bit(Rung::tiled_mlp);
  const RungSearch rs = search_rungs(base, free, 1024);
  CHECK(rs.candidates.size() == 32);
  for (const auto& c : rs.candidates) CHECK_FALSE(c.set & bit(Rung::tiled_mlp));
}

TEST_CASE("search_rungs stays fast: llama-3.1-405b on 32 GPUs", "[sim][rungs]") {
  const Scenario base = preset("llama-3.1-405b", "h200-sxm-141gb", 32);
  const auto t0 = std::chrono::steady_clock::now();
  const RungSearch rs = search_rungs(base, kAllRungs, 1024);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(rs.chosen().cap.max_seq_len > 0);
  CHECK(s < 1.0);
}

TEST_CASE("target: the fewest GPUs reaching 1M and 4M tokens (llama-3.1-8b, H100)", "[sim][rungs]") {
  const Scenario base = preset("llama-3.1-8b", "h100-sxm-80gb", 1);
  const auto counts = gpu_counts(8, kMaxTargetGpus);
  CHECK(std::vector<std::int64_t>(counts.begin(), counts.begin() + 6) == std::vector<std::int64_t>{1, 2, 4, 8, 16, 24});
  CHECK(counts.back() == kMaxTargetGpus);
  for (const std::int64_t target : {std::int64_t{1000000}, std::int64_t{4000000}}) {
    INFO("target " << target);
    const TargetResult t = search_target(base, kAllRungs, target, 1024, false);
    REQUIRE(t.reached);
    REQUIRE_FALSE(t.options.empty());
    CHECK(fits(t.scenario, t.eval_seq_len));
    CHECK(t.eval_seq_len >= target);
    CHECK(t.scenario.gpus == t.gpus);
    for (std::size_t i = 1; i < t.options.size(); ++i)
      CHECK(t.options[i - 1].at_target.step_time_s <= t.options[i].at_target.step_time_s);
    // one GPU step fewer: no rung set fits the target (checked set by set here)
    const auto at = std::find(counts.begin(), counts.end(), t.gpus);
    REQUIRE(at != counts.end());
    if (at != counts.begin()) {
      Scenario fewer = base;
      fewer.gpus = *(at - 1);
      fewer.plan.dp_shard_size = fewer.gpus;
      for (RungSet s = 0; s <= kAllRungs; ++s) {
        const Scenario sc = with_rungs(fewer, s);
        const std::int64_t P = sc.plan.sp_size;
        CHECK_FALSE(fits(sc, (target + P - 1) / P * P));
      }
    }
  }
}

TEST_CASE("target: not reachable within the GPU limit says so with the longest found", "[sim][rungs]") {
  const Scenario base = preset("llama-3.1-8b", "h100-sxm-80gb", 1);
  const TargetResult t = search_target(base, kAllRungs, 4000000, 1024, false, 4);
  CHECK_FALSE(t.reached);
  CHECK(t.options.empty());
  REQUIRE(t.scanned.size() == 3);  // 1, 2, 4
  std::int64_t best = 0, best_gpus = 0;
  for (const auto& s : t.scanned)
    if (s.best.cap.max_seq_len > best) { best = s.best.cap.max_seq_len; best_gpus = s.gpus; }
  CHECK(t.gpus == best_gpus);
  CHECK(best < 4000000);
  // --gpus given: only that count
  Scenario two = base;
  two.gpus = two.plan.dp_shard_size = 2;
  CHECK(search_target(two, kAllRungs, 100000, 1024, true).scanned.size() == 1);
}

TEST_CASE("explain: each toggle and x2 GPUs is the plan of that scenario", "[sim][rungs]") {
  Scenario sc = with_rungs(preset("llama-3.1-8b", "h100-sxm-80gb", 8), bit(Rung::tiled_logits) | bit(Rung::ulysses));
  const auto effects = rung_effects(sc, kAllRungs, true, false, 1024);
  REQUIRE(effects.size() == kRungCount + 1);
  const std::int64_t now = longest(sc);
  for (int i = 0; i < kRungCount; ++i) {
    const RungSet toggled = rungs_of(sc) ^ (1u << i);
    CHECK(effects[i].adds == ((toggled >> i) & 1u));
    CHECK(effects[i].result.cap.max_seq_len == longest(with_rungs(sc, toggled)));
    const auto S = effects[i].result.cap.max_seq_len;
    CHECK(effects[i].verdict == (S > now ? "longer" : S < now ? "shorter" : effects[i].verdict));
  }
  Scenario doubled = with_rungs(preset("llama-3.1-8b", "h100-sxm-80gb", 16), rungs_of(sc));
  CHECK(doubled.plan.sp_size == 16);
  CHECK(effects.back().change == "gpus_x2");
  CHECK(effects.back().result.cap.max_seq_len == longest(doubled));
}
