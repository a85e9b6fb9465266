// Validation and capacity sets: cases built into checked scenarios (eval/validation_set.hpp).
#include "eval/validation_set.hpp"

#include "eval/step_run.hpp"

#include "runtime/step_plan.hpp"

#include <fmt/format.h>

#include "runtime/deepspeed/step_run.hpp"
#include "core/errors.hpp"

namespace ulysses::eval {

ValidationSet load_validation_set(const std::string& path) {
  ValidationSet s = load_case_set(path);
  // every case must build a valid scenario: fail now, naming the case, not in the middle of a run
  // (run.* keys are the deepspeed backend's worker options: step_set_case checks them; a block
  // backend passes them to case_scenario, which refuses them as unknown keys)
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    Keys all;
    for (const auto& kv : s.defaults)
      if (kv.first.rfind("run.", 0) != 0) all.push_back(kv);
    for (const auto& kv : s.cases[i].keys)
      if (kv.first.rfind("run.", 0) != 0) all.push_back(kv);
    case_scenario(s.model, s.profile, all, path, s.cases[i].name);
  }
  return s;
}

Scenario case_scenario(const std::string& model, const std::string& profile, const Keys& keys, const std::string& origin,
                       const std::string& name) {
  Scenario sc;
  sc.name = name;
  set_key(sc, "model", model, origin);
  set_key(sc, "profile", profile, origin);
  bool gpus_given = false;
  for (const auto& [k, v] : keys) {
    set_key(sc, k, v, origin);
    gpus_given = gpus_given || k == "gpus";
  }
  if (!gpus_given) {
    std::int64_t g = 0;
    if (__builtin_mul_overflow(sc.plan.sp_size, sc.plan.dp_replicate_size, &g) || __builtin_mul_overflow(g, sc.plan.dp_shard_size, &g))
      throw core::InputError(origin, "cases." + name + ".gpus",
                       "plan.sp_size * dp_replicate_size * dp_shard_size does not fit in 64 bits");
    sc.gpus = g;
  }
  validate(sc, origin.empty() ? name : origin + " (case " + name + ")");
  return sc;
}

RunKeys split_run_keys(Keys& keys, const std::string& origin, const std::string& name) {
  RunKeys r;
  Keys kept;
  for (const auto& [k, v] : keys) {
    const std::string where = fmt::format("cases.{}.{}", name, k);
    if (k == "run.expandable_segments") {  // the records' earlier spelling of plan.expandable_segments
      kept.emplace_back("plan.expandable_segments", v);
    } else if (k == "run.ballast_GiB") {
      double g = 0;
      std::size_t used = 0;
      try {
        g = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || !(g >= 0 && g < 1024)) throw core::InputError(origin, where, fmt::format("must be a number of GiB in [0, 1024) (got '{}')", v));
      r.ballast_bytes = static_cast<std::int64_t>(g * double(1ULL << 30));
    } else if (k.rfind("run.", 0) == 0) {
      throw core::InputError(origin, where, "unknown run option (run.ballast_GiB)");
    } else {
      kept.emplace_back(k, v);
    }
  }
  keys = kept;
  return r;
}

StepSetCase step_set_case(const std::string& model, const std::string& profile, const std::string& name, Keys keys,
                          const std::string& origin, const std::string& backend) {
  StepSetCase c;
  c.name = name;
  c.keys = keys;
  c.run = split_run_keys(keys, origin, name);
  c.sc = case_scenario(model, profile, keys, origin, name);
  // the backend's refusals, before the first run; then the runtime that runs it
  check_whole_step(backend, c.sc, {}, origin);
  c.sc = step_scenario_for(backend, c.sc);
  return c;
}

Keys case_keys(const ValidationSet& set, const SetCase& c) {
  Keys keys = set.defaults;
  keys.insert(keys.end(), c.keys.begin(), c.keys.end());
  return keys;
}

}  // namespace ulysses::eval
