// The feature rung table (sim/rungs.hpp): what each rung changes in a Scenario.
#include "sim/rungs.hpp"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/heads.hpp"

namespace ulysses {
namespace {

void derive_shard(Scenario& sc) {
  auto& p = sc.plan;
  if (!p.dp_shard_auto) return;
  const std::int64_t taken = p.sp_size * p.dp_replicate_size;
  p.dp_shard_size = (taken > 0 && sc.gpus % taken == 0) ? sc.gpus / taken : 0;
}

void set_tiled_logits(Scenario& sc, bool on) { sc.plan.tiled_logits = on; }
void set_ulysses(Scenario& sc, bool on) {
  if (on) set_sp_auto(sc);
  else sc.plan.sp_size = 1;
  derive_shard(sc);
}
void set_tiled_mlp(Scenario& sc, bool on) { sc.plan.tiled_mlp = on; }
void set_ckpt_offload(Scenario& sc, bool on) { sc.plan.offload_checkpoints = on; }
void set_optimizer_offload(Scenario& sc, bool on) { sc.plan.offload_optimizer = on; }
void set_param_offload(Scenario& sc, bool on) { sc.plan.offload_params = on; }

const std::array<RungInfo, kRungCount> kRungs = {{
    {Rung::tiled_logits, "tiled_logits", "tiled logits/loss", "--tiled-logits", &set_tiled_logits},
    {Rung::ulysses, "ulysses", "Ulysses sp (sp auto)", "--sp-size", &set_ulysses},
    {Rung::tiled_mlp, "tiled_mlp", "TiledMLP", "--tiled-mlp", &set_tiled_mlp},
    {Rung::ckpt_offload, "ckpt_offload", "checkpoint offload", "--offload-checkpoints", &set_ckpt_offload},
    {Rung::optimizer_offload, "optimizer_offload", "optimizer offload", "--offload-optimizer", &set_optimizer_offload},
    {Rung::param_offload, "param_offload", "parameter offload", "--offload-params", &set_param_offload},
}};

}  // namespace

const std::array<RungInfo, kRungCount>& rungs() { return kRungs; }
const RungInfo& rung_info(Rung r) { return kRungs[static_cast<std::size_t>(r)]; }

std::int64_t largest_valid_sp(const ModelSpec& m, std::int64_t ranks) {
  for (std::int64_t p = ranks; p > 1; --p) {
    if (ranks % p == 0 && core::sp_head_rule(m.heads, m.kv_heads, p) == core::HeadRule::ok) return p;
  }
  return 1;
}

void set_sp_auto(Scenario& sc) {
  const auto& p = sc.plan;
  std::int64_t ranks = p.dp_replicate_size > 0 ? sc.gpus / p.dp_replicate_size : sc.gpus;
  if (!p.dp_shard_auto && p.dp_shard_size > 0) ranks /= p.dp_shard_size;
  sc.plan.sp_size = largest_valid_sp(sc.model, std::max<std::int64_t>(ranks, 1));
  derive_shard(sc);
}

void set_rungs(Scenario& sc, RungSet on, RungSet touch) {
  for (const auto& r : kRungs)
    if (touch & bit(r.rung)) r.set(sc, (on & bit(r.rung)) != 0);
  derive_shard(sc);
}

Scenario with_rungs(Scenario sc, RungSet on, RungSet touch) {
  set_rungs(sc, on, touch);
  return sc;
}

RungSet rungs_of(const Scenario& sc) {
  const auto& p = sc.plan;
  RungSet s = 0;
  if (p.tiled_logits) s |= bit(Rung::tiled_logits);
  if (p.sp_size > 1) s |= bit(Rung::ulysses);
  if (p.tiled_mlp) s |= bit(Rung::tiled_mlp);
  if (p.offload_checkpoints) s |= bit(Rung::ckpt_offload);
  if (p.offload_optimizer) s |= bit(Rung::optimizer_offload);
  if (p.offload_params) s |= bit(Rung::param_offload);
  return s;
}

int rung_count(RungSet s) { return std::popcount(s & kAllRungs); }

std::string rung_set_name(RungSet s) {
  std::string out;
  for (const auto& r : kRungs)
    if (s & bit(r.rung)) {
      if (!out.empty()) out += '+';
      out += r.name;
    }
  return out.empty() ? "none" : out;
}

std::string rung_set_label(RungSet s) {
  std::string out;
  for (const auto& r : kRungs)
    if (s & bit(r.rung)) {
      if (!out.empty()) out += ", ";
      out += r.label;
    }
  return out.empty() ? "no features" : out;
}

RungSet parse_rung_set(std::string_view names, const std::string& origin, const std::string& key) {
  RungSet s = 0;
  std::string all;
  for (const auto& r : kRungs) {
    if (!all.empty()) all += ", ";
    all += r.name;
  }
  if (names.empty() || names == "none") return 0;
  std::size_t start = 0;
  while (start <= names.size()) {
    const std::size_t comma = std::min(names.find(',', start), names.size());
    const std::string_view word = names.substr(start, comma - start);
    const auto it = std::find_if(kRungs.begin(), kRungs.end(), [&](const RungInfo& r) { return word == r.name; });
    if (it == kRungs.end())
      throw core::InputError(origin, key, fmt::format("'{}' is not a feature (one of: {}; or none)", word, all));
    if (s & bit(it->rung)) throw core::InputError(origin, key, fmt::format("'{}' is listed twice", word));
    s |= bit(it->rung);
    start = comma + 1;
  }
  return s;
}

}  // namespace ulysses
