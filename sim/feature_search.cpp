// The rung searches (sim/feature_search.hpp). Each plan is one find_max_seq_len (microseconds), so
// trying every subset of the six rungs (64 plans) per GPU count is cheap; nothing assumes that more
// rungs or more GPUs give a longer sequence (they need not: offload fills host RAM).
#include "sim/feature_search.hpp"

#include <algorithm>

#include "sim/config.hpp"
#include "sim/predict.hpp"

namespace ulysses {
namespace {

void set_gpus(Scenario& sc, std::int64_t gpus) {
  sc.gpus = gpus;
  auto& p = sc.plan;
  if (p.dp_shard_auto) {
    const std::int64_t taken = p.sp_size * p.dp_replicate_size;
    p.dp_shard_size = (taken > 0 && gpus % taken == 0) ? gpus / taken : 0;
  }
}

RungCandidate plan_scenario(const Scenario& sc, RungSet set, std::int64_t granularity) {
  RungCandidate c;
  c.set = set;
  Scenario s = sc;
  s.plan.seq_len = s.plan.sp_size > 0 ? s.plan.sp_size : 1;  // the search ignores it; check() needs one
  c.invalid = check(s);
  if (c.valid()) c.cap = find_max_seq_len(s, granularity);
  return c;
}

// The target rounded up to what the layout accepts (a multiple of sp_size unless padding is on).
std::int64_t eval_len(const Scenario& sc, std::int64_t target) {
  if (sc.plan.pad_to_multiple_of > 0) return target;
  const std::int64_t p = std::max<std::int64_t>(sc.plan.sp_size, 1);
  return (target + p - 1) / p * p;
}

}  // namespace

bool better(const RungCandidate& a, const RungCandidate& b) {
  if (a.valid() != b.valid()) return a.valid();
  if (a.valid()) {
    if (a.cap.max_seq_len != b.cap.max_seq_len) return a.cap.max_seq_len > b.cap.max_seq_len;
    if (a.cap.max_seq_len > 0 && a.step_time_s() != b.step_time_s()) return a.step_time_s() < b.step_time_s();
  }
  if (rung_count(a.set) != rung_count(b.set)) return rung_count(a.set) < rung_count(b.set);
  return a.set < b.set;
}

RungCandidate plan_rungs(const Scenario& base, RungSet set, RungSet touch, std::int64_t granularity) {
  const Scenario s = with_rungs(base, set, touch);
  return plan_scenario(s, rungs_of(s), granularity);
}

RungSearch search_rungs(const Scenario& base, RungSet free, std::int64_t granularity) {
  RungSearch r;
  r.free = free & kAllRungs;
  // every subset of free, enumerated in increasing mask order
  RungSet sub = 0;
  do {
    r.candidates.push_back(plan_rungs(base, sub, r.free, granularity));  // set: every rung on, fixed ones too
    sub = (sub - r.free) & r.free;
  } while (sub != 0);
  for (std::size_t i = 1; i < r.candidates.size(); ++i)
    if (better(r.candidates[i], r.candidates[static_cast<std::size_t>(r.best)])) r.best = static_cast<int>(i);
  return r;
}

RungSet best_rungs_at(const Scenario& base, RungSet free, std::int64_t granularity) {
  free &= kAllRungs;
  RungSet best = 0;
  double best_t = 0;
  bool found = false;
  RungSet sub = 0;
  do {
    const Scenario s = with_rungs(base, sub, free);
    if (check(s).empty()) {
      const Prediction p = predict(s);
      if (p.fits_gpu && p.fits_host && (!found || p.step_time_s < best_t)) {
        best = sub;
        best_t = p.step_time_s;
        found = true;
      }
    }
    sub = (sub - free) & free;
  } while (sub != 0);
  return found ? best : search_rungs(base, free, granularity).chosen().set & free;
}

std::vector<RungEffect> rung_effects(const Scenario& sc, RungSet which, bool more_gpus, bool ulysses_fixed,
                                     std::int64_t granularity) {
  const RungSet now = rungs_of(sc);
  const RungCandidate current = plan_scenario(sc, now, granularity);
  const auto verdict = [&](const RungCandidate& c) -> std::string {
    if (!c.valid()) return "invalid";
    if (!current.valid()) return "longer";
    const auto a = c.cap.max_seq_len, b = current.cap.max_seq_len;
    if (a != b) return a > b ? "longer" : "shorter";
    if (a == 0) return "no change";
    const double ratio = c.step_time_s() / current.step_time_s();
    if (ratio < 0.9995) return "faster";
    if (ratio > 1.0005) return "slower";
    return "no change";
  };
  std::vector<RungEffect> out;
  for (const auto& r : rungs()) {
    if (!(which & bit(r.rung))) continue;
    RungEffect e;
    e.change = r.name;
    e.adds = !(now & bit(r.rung));
    const Scenario s = with_rungs(sc, now ^ bit(r.rung), bit(r.rung));
    e.result = plan_scenario(s, rungs_of(s), granularity);
    e.verdict = verdict(e.result);
    out.push_back(std::move(e));
  }
  if (more_gpus) {
    RungEffect e;
    e.change = "gpus_x2";
    Scenario s = sc;
    set_gpus(s, sc.gpus * 2);
    if ((now & bit(Rung::ulysses)) && !ulysses_fixed) set_sp_auto(s);
    e.result = plan_scenario(s, rungs_of(s), granularity);
    e.verdict = verdict(e.result);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::int64_t> gpu_counts(std::int64_t gpus_per_node, std::int64_t max_gpus) {
  std::vector<std::int64_t> n;
  const std::int64_t node = std::max<std::int64_t>(gpus_per_node, 1);
  for (std::int64_t g = 1; g < node && g <= max_gpus; g *= 2) n.push_back(g);
  for (std::int64_t g = node; g <= max_gpus; g += node) n.push_back(g);
  return n;
}

TargetResult search_target(const Scenario& base, RungSet free, std::int64_t target, std::int64_t granularity,
                           bool gpus_fixed, std::int64_t max_gpus) {
  TargetResult t;
  t.target = target;
  free &= kAllRungs;
  const std::int64_t node = resolved_gpus_per_node(base);
  const std::vector<std::int64_t> counts = gpus_fixed ? std::vector<std::int64_t>{base.gpus} : gpu_counts(node, max_gpus);
  std::size_t longest = 0;  // index into scanned of the longest S so far
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::int64_t g = counts[i];
    t.counts_tried = i + 1;
    Scenario at = base;
    set_gpus(at, g);
    // does some set fit the target here? one predict per set (every count is tried)
    RungSet sub = 0;
    Scenario s = at;  // one copy per count: the rungs in free are all set each time
    do {
      set_rungs(s, sub, free);
      const RungSet set = rungs_of(s);
      const bool seen = std::any_of(t.options.begin(), t.options.end(), [&](const TargetOption& o) { return o.plan.set == set; });
      s.plan.seq_len = eval_len(s, target);
      if (!seen && check(s).empty()) {  // seen: e.g. the ulysses rung on one GPU (sp auto = 1) is the set without it
        const Prediction p = predict(s);
        if (p.fits_gpu && p.fits_host) t.options.push_back({plan_scenario(s, set, granularity), p});
      }
      sub = (sub - free) & free;
    } while (sub != 0);
    t.reached = !t.options.empty();
    // the longest S at this count (the table and the best found): below 16 counts, at whole powers
    // of two of nodes, at the last count and at the answer; in between only reachability is needed
    const std::int64_t nodes = g / std::max<std::int64_t>(node, 1);
    const bool listed = i < 16 || g < node || (g % node == 0 && (nodes & (nodes - 1)) == 0) || i + 1 == counts.size();
    if (listed || t.reached) {
      const RungSearch rs = search_rungs(at, free, granularity);
      t.scanned.push_back({g, rs.chosen()});
      if (t.scanned.size() == 1 || better(rs.chosen(), t.scanned[longest].best)) {
        longest = t.scanned.size() - 1;
        t.gpus = g;
      }
    }
    if (t.reached) {
      t.gpus = g;
      break;
    }
  }
  if (t.reached) {
    std::stable_sort(t.options.begin(), t.options.end(), [](const TargetOption& a, const TargetOption& b) {
      if (a.at_target.step_time_s != b.at_target.step_time_s) return a.at_target.step_time_s < b.at_target.step_time_s;
      return rung_count(a.plan.set) < rung_count(b.plan.set);
    });
    Scenario at = base;
    set_gpus(at, t.gpus);
    t.scenario = with_rungs(at, t.options.front().plan.set, free & kAllRungs);
    t.eval_seq_len = t.options.front().at_target.seq_len;
    t.scenario.plan.seq_len = t.eval_seq_len;
  }
  return t;
}

}  // namespace ulysses
