// The block's longest S, predicted and bisected on the GPUs (eval/block_capacity.hpp).
#include "eval/block_capacity.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "eval/block_validation.hpp"
#include "eval/record_in.hpp"
#include "reports/table.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/predict.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "runtime/backend.hpp"
#include "runtime/cuda/capacity_probe.hpp"
#endif

namespace ulysses::eval {

using Json = reports::Json;

core::bytes_t usable_bytes(const Scenario& sc) {
  const Calibration& c = sc.hw.calibrated;
  const bool cal = sc.hw.has_calibration;
  const core::bytes_t ctx = cal && c.cuda_context_bytes >= 0 ? c.cuda_context_bytes : sc.hw.cuda_context_bytes;
  const core::bytes_t nccl = cal && c.nccl_buffer_bytes >= 0 ? c.nccl_buffer_bytes : sc.hw.nccl_buffer_bytes;
  return sc.hw.hbm_bytes - ctx - (sc.plan.sp_size > 1 ? nccl : 0);
}

namespace {
core::bytes_t predicted_peak(Scenario sc, std::int64_t S) {
  sc.plan.seq_len = S;
  return predict(sc).block_peak_bytes;
}
}  // namespace

std::int64_t predicted_max_S(const Scenario& sc, std::int64_t g) {
  const core::bytes_t usable = usable_bytes(sc);
  if (predicted_peak(sc, g) > usable) return 0;
  const std::int64_t k_max = kMaxSeqLen / g;  // g >= 1 (load_record, --granularity)
  std::int64_t lo = 1, hi = 2;  // in units of g
  while (hi <= k_max && predicted_peak(sc, hi * g) <= usable) lo = hi, hi *= 2;
  if (hi > k_max) hi = k_max + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (predicted_peak(sc, mid * g) <= usable ? lo : hi) = mid;
  }
  return lo * g;
}

double capacity_error_pct(const BlockCapacityCase& c) { return block_error_pct(double(c.predicted_S), double(c.measured_S)); }

std::string block_capacity_table(const std::vector<BlockCapacityCase>& cs) {
  reports::Table t({{"case", "", reports::Align::left}, {"P", ""}, {"H/H_kv/D", ""}, {"predicted S", "tokens"},
                    {"measured S", "tokens"}, {"error", "%"}});
  for (const auto& c : cs)
    t.add_row({c.name, fmt::format("{}", c.sc.plan.sp_size),
               fmt::format("{}/{}/{}", c.sc.model.heads, c.sc.model.kv_heads, c.sc.model.head_dim),
               fmt::format("{}", c.predicted_S), fmt::format("{}", c.measured_S), fmt::format("{:+.2f}", capacity_error_pct(c))});
  return t.render();
}

std::vector<std::string> missed_block_capacity(const std::vector<BlockCapacityCase>& cs, double max_err_pct) {
  std::vector<std::string> missed;
  for (const auto& c : cs) {
    const double e = capacity_error_pct(c);
    if (max_err_pct >= 0 && (c.measured_S <= 0 || std::fabs(e) > max_err_pct))
      missed.push_back(fmt::format("{}: predicted {} vs measured {} ({:+.2f}%)", c.name, c.predicted_S, c.measured_S, e));
  }
  return missed;
}

BlockCapacityCase predicted_block_capacity_case(const ValidationSet& set, const SetCase& c, const std::string& profile,
                                                std::int64_t g) {
  BlockCapacityCase k;
  k.name = c.name;
  k.keys = case_keys(set, c);
  k.sc = case_scenario(set.model, profile, k.keys, set.path, c.name);
  k.predicted_S = predicted_max_S(k.sc, g);
  k.predicted_usable = usable_bytes(k.sc);
  return k;
}

std::vector<BlockCapacityCase> repredict_block_capacity_record(const Json& rec, const std::string& path, const std::string& profile) {
  const std::int64_t g = rec.value("granularity", std::int64_t{1024});  // 1..2^24: load_record checked it
  std::vector<BlockCapacityCase> cs;
  for_each_stored_case(rec, path, "stored case", [&](const Json& c) {
    BlockCapacityCase k;
    k.name = c.at("name").get<std::string>();
    k.keys = stored_keys(c);
    k.sc = case_scenario(rec.value("model", ""), profile, k.keys, path, k.name);
    k.predicted_S = predicted_max_S(k.sc, g);
    k.measured_S = c.at("measured_S").get<std::int64_t>();
    cs.push_back(std::move(k));
  });
  return cs;
}

#ifdef ULYSSES_WITH_CUDA
std::int64_t measured_max_S(BlockCapacityCase& c, std::int64_t g, double timeout_s, std::ostream& log) {
  runtime::BlockShape shape = runtime::block_shape_of(c.sc);
  Json probes = Json::array();
  auto fits = [&](std::int64_t S) {
    shape.S = S;
    const auto p = runtime::cuda::probe_block_fit(shape, {}, timeout_s);
    probes.push_back({{"S", S}, {"fits", p.fits}, {"arena_bytes", p.arena_bytes}, {"free_before_bytes", p.free_before_bytes}});
    log << fmt::format("  {} S={}: {}\n", c.name, S, p.fits ? "fits" : "out of memory");
    return p.fits;
  };
  const std::int64_t guess = std::max<std::int64_t>(g, c.predicted_S / g * g);
  std::int64_t lo = 0, hi = 0;  // lo fits (0: none known), hi does not (0: none known)
  if (fits(guess)) {
    lo = guess;
    for (double f : {1.01, 1.03, 1.1, 1.3, 2.0, 4.0}) {
      const std::int64_t s = (static_cast<std::int64_t>(guess * f) / g + 1) * g;
      if (!fits(s)) { hi = s; break; }
      lo = s;
    }
  } else {
    hi = guess;
    for (double f : {0.99, 0.97, 0.9, 0.7, 0.5, 0.25, 0.1}) {
      const std::int64_t s = std::max<std::int64_t>(g, static_cast<std::int64_t>(guess * f) / g * g);
      if (fits(s)) { lo = s; break; }
      hi = s;
    }
  }
  if (lo == 0 || hi == 0) throw std::runtime_error(fmt::format("case {}: could not bracket the longest S", c.name));
  while (hi - lo > g) {
    const std::int64_t mid = (lo + (hi - lo) / 2) / g * g;
    (fits(mid) ? lo : hi) = mid;
  }
  c.probes = probes;
  return lo;
}

std::vector<std::int64_t> warm_up_exchanges(const Scenario& sc, std::int64_t g) {
  runtime::BlockShape small = runtime::block_shape_of(sc);
  small.S = 8 * g;
  return runtime::cuda::probe_block_fit(small, {0, 1, 2, 3, 4, 5}, 120).free_after_bytes;
}

Json measured_case_json(const BlockCapacityCase& c, double max_run_s, std::ostream& log) {
  Scenario at = c.sc;
  at.plan.seq_len = c.measured_S;
  const Prediction p = predict(at);
  double block_s = 0;
  for (double t : p.block) block_s += t;
  std::vector<int> phases;
  if (block_s <= max_run_s) phases = {0, 1, 2, 3, 4, 5};
  else if (c.sc.plan.sp_size > 1) phases = {0, 2, 3, 5};
  runtime::BlockShape shape = runtime::block_shape_of(at);
  Json run{{"phases", phases}, {"predicted_block_s", block_s}};
  if (!phases.empty()) {
    try {
      const auto r = runtime::cuda::probe_block_fit(shape, phases, 600);
      run["ran"] = r.fits, run["wall_s"] = r.phases_s, run["free_after_bytes"] = r.free_after_bytes;
      run["arena_bytes"] = r.arena_bytes;
      log << fmt::format("  {} at S={}: ran {} phase(s) in {:.2f} s: {}\n", c.name, c.measured_S, phases.size(), r.phases_s,
                         r.fits ? "ok" : "out of memory");
    } catch (const std::exception& e) {
      run["ran"] = false, run["error"] = e.what();
      log << fmt::format("  {} at S={}: the phases failed: {}\n", c.name, c.measured_S, e.what());
    }
  }
  Json keys = Json::array();
  for (const auto& [k, v] : c.keys) keys.push_back({k, v});
  return {{"name", c.name}, {"keys", keys}, {"P", c.sc.plan.sp_size}, {"measured_S", c.measured_S},
          {"predicted_S", c.predicted_S}, {"error_pct", capacity_error_pct(c)},
          {"predicted_usable_bytes", c.predicted_usable}, {"predicted_peak_bytes_at_measured_S", p.block_peak_bytes},
          {"run_at_measured_S", run}, {"probes", c.probes}};
}
#endif

}  // namespace ulysses::eval
