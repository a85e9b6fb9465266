#pragma once
// The feature rungs of the ALST ladder (docs/MODEL.md "Feature rungs and the searches"): one table
// of name, label and the function that turns the rung on or off in a Scenario.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/scenario.hpp"

namespace ulysses {

// Table order is the ladder order (reports/main-job.sh uses the names).
enum class Rung : int { tiled_logits, ulysses, tiled_mlp, ckpt_offload, optimizer_offload, param_offload };
inline constexpr int kRungCount = 6;
using RungSet = unsigned;  // bit i = Rung i
inline constexpr RungSet kAllRungs = (1u << kRungCount) - 1;
constexpr RungSet bit(Rung r) { return 1u << static_cast<int>(r); }

struct RungInfo {
  Rung rung;
  const char* name;   // tiled_logits, ulysses, ... (--features, JSON, main job labels)
  const char* label;  // "tiled logits/loss", ... (tables)
  const char* flag;   // the command-line flag that fixes it (then --all-features does not search it)
  void (*set)(Scenario& sc, bool on);
};
const std::array<RungInfo, kRungCount>& rungs();
const RungInfo& rung_info(Rung r);

// Largest P that divides `ranks` and satisfies the head rules (H % P == 0, and H_kv % P == 0 or
// P % H_kv == 0); 1 when none larger does. The ulysses rung's sp_size ("sp auto").
std::int64_t largest_valid_sp(const ModelSpec& m, std::int64_t ranks);

// sp_size auto: the largest valid P over the GPUs not taken by dp_replicate (and dp_shard unless
// plan.dp_shard_auto); dp_shard_size follows when plan.dp_shard_auto.
void set_sp_auto(Scenario& sc);

// sc with every rung in `touch` set on (in `on`) or off, in table order; dp_shard_size re-derived
// when plan.dp_shard_auto. The result may break a rule (check() says which).
Scenario with_rungs(Scenario sc, RungSet on, RungSet touch = kAllRungs);
void set_rungs(Scenario& sc, RungSet on, RungSet touch = kAllRungs);  // the same in place (no copy)
// The rungs a scenario has on (ulysses: sp_size > 1).
RungSet rungs_of(const Scenario& sc);

// "tiled_logits+ulysses+..." ("none" for the empty set); names: `,`-separated list of rung names
// -> set, InputError(origin, key, rule) on an unknown or repeated name.
std::string rung_set_name(RungSet s);
std::string rung_set_label(RungSet s);  // "tiled logits/loss, Ulysses sp, ..." ("no features")
RungSet parse_rung_set(std::string_view names, const std::string& origin, const std::string& key);
int rung_count(RungSet s);

}  // namespace ulysses
