#pragma once
// Searches over the feature rungs (sim/rungs.hpp; docs/MODEL.md "Feature rungs and the searches"):
// the best rung set for the longest sequence (--all-features), what toggling each rung or doubling
// the GPUs gives (--explain), and the fewest GPUs reaching a target length (--target-seq-len).
#include <cstdint>
#include <string>
#include <vector>

#include "sim/capacity.hpp"
#include "sim/rungs.hpp"

namespace ulysses {

// One rung set's plan: the longest S, or why the set is not a valid plan.
struct RungCandidate {
  RungSet set = 0;
  std::string invalid;  // "" when the scenario with this set passes check(); else the rule
  CapacityResult cap;   // when valid
  bool valid() const { return invalid.empty(); }
  core::seconds_t step_time_s() const { return cap.at_max.step_time_s; }
};

// a better than b: valid, then longer S, then faster step at that S, then fewer rungs, then the lower set.
bool better(const RungCandidate& a, const RungCandidate& b);

RungCandidate plan_rungs(const Scenario& base, RungSet set, RungSet touch, std::int64_t granularity);

// Every subset of `free` on top of base (the rungs outside `free` stay as base has them).
struct RungSearch {
  RungSet free = 0;
  std::vector<RungCandidate> candidates;  // one per subset of free, in mask order (set: all rungs on)
  int best = 0;                           // index into candidates
  const RungCandidate& chosen() const { return candidates[static_cast<std::size_t>(best)]; }
};
RungSearch search_rungs(const Scenario& base, RungSet free, std::int64_t granularity);

// At a fixed length (predict, run, ... with --all-features): of the subsets of `free` that fit
// base.plan.seq_len, the one with the fastest step; when none fits, search_rungs' choice.
RungSet best_rungs_at(const Scenario& base, RungSet free, std::int64_t granularity);

// One row of --explain or of the --all-features reasons: sc with one change.
struct RungEffect {
  std::string change;    // rung name, or "gpus_x2"
  bool adds = true;      // the rung is added (false: taken away; gpus_x2: always true)
  RungCandidate result;  // the plan with the change
  std::string verdict;   // "longer", "no change", "shorter", "faster", "slower", "invalid"
};
// The effect of toggling each rung of `which` in sc (the others as sc has them), and, when
// `more_gpus`, of doubling the GPUs (sp auto re-derived when the ulysses rung is on and not fixed).
std::vector<RungEffect> rung_effects(const Scenario& sc, RungSet which, bool more_gpus, bool ulysses_fixed,
                                     std::int64_t granularity);

// --target-seq-len: scans GPU counts 1, 2, 4, ... below a node, then whole nodes, up to max_gpus
// (or only base.gpus when gpus_fixed); at each, every set of `free` is predicted at the target; stops
// at the first count where some set fits. Options: the sets that fit there, fastest step at the
// target first. The longest S (search_rungs) is searched at the first 16 counts, at whole powers of
// two of nodes, at the last count and at the answer (`scanned`); "the best found" is over those.
struct TargetOption {
  RungCandidate plan;    // the longest S with this set
  Prediction at_target;  // at eval_seq_len
};
struct TargetScan {      // the best set at one count
  std::int64_t gpus = 0;
  RungCandidate best;
};
struct TargetResult {
  std::int64_t target = 0;
  std::int64_t eval_seq_len = 0;  // the target rounded up to a multiple of sp_size where needed (at the answer)
  bool reached = false;
  std::int64_t gpus = 0;          // the answer (reached), else the count of the longest S found
  std::vector<TargetOption> options;  // reached: every set reaching the target at `gpus`, fastest first
  std::vector<TargetScan> scanned;    // the counts whose longest S was searched, in order
  std::size_t counts_tried = 0;       // every count whose sets were predicted at the target
  Scenario scenario;                  // the fastest option's scenario at eval_seq_len (reached)
};
inline constexpr std::int64_t kMaxTargetGpus = 4096;
std::vector<std::int64_t> gpu_counts(std::int64_t gpus_per_node, std::int64_t max_gpus);
TargetResult search_target(const Scenario& base, RungSet free, std::int64_t target, std::int64_t granularity,
                           bool gpus_fixed, std::int64_t max_gpus = kMaxTargetGpus);

}  // namespace ulysses
