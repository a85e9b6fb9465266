#pragma once
// Validation and capacity sets (`ulysses validate|capacity --set`): the set file's cases built into
// checked scenarios, for the block backends and for whole steps on the deepspeed backend.
//
// Validation set (YAML, scenarios/validation/*.yaml; read by sim/case_set.hpp load_case_set):
//   name: h200
//   model: llama-3.1-8b          # base preset; the cases override the attention dims
//   profile: h200-sxm-141gb
//   defaults: {plan.attn_implementation: ulysses_flash, ...}   # set_key keys for every case
//   cases:
//     - {name: mha-s6k-sp2, plan.sp_size: 2, plan.seq_len: 6144, model.heads: 16, ...}
// Every case key is a dotted key of set_key (sim/config.hpp); `gpus` defaults to plan.sp_size.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/case_set.hpp"
#include "sim/config.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

using Keys = KeyValues;
using ValidationSet = CaseSet;

// load_case_set, then every case's scenario built (case_scenario, run.* keys left out: they are the
// deepspeed backend's worker options) so that a bad case fails now, naming it, not in the middle of a
// run. InputError naming file and key.
ValidationSet load_validation_set(const std::string& path);

// The case's scenario: model and profile presets, then the keys (set_key), gpus = sp_size *
// dp_replicate_size * dp_shard_size unless given, then validate(). origin names the file in errors.
Scenario case_scenario(const std::string& model, const std::string& profile, const Keys& keys,
                       const std::string& origin, const std::string& name);

// Case keys of step validation and capacity sets: run.* keys are worker options, removed from `keys`
// (what remains are set_key keys): run.ballast_GiB X. run.expandable_segments, the earlier spelling of
// plan.expandable_segments, becomes that key.
// InputError naming origin, cases.<name>.<key> and the rule.
struct RunKeys {
  std::int64_t ballast_bytes = 0;
};
RunKeys split_run_keys(Keys& keys, const std::string& origin, const std::string& case_name);

// One case of a step validation or capacity set (or of its stored record): the defaults and case
// keys as given, the worker options split off, the scenario built and checked (including what the
// backend refuses: the deepspeed worker's job, or our runtime's step: runtime/step_plan.hpp) before
// anything runs, then set to the runtime the backend runs (eval/step_run.hpp step_scenario_for).
// InputError naming origin and the case.
struct StepSetCase {
  std::string name;
  Keys keys;  // as given (run.* included): what a record stores
  RunKeys run;
  Scenario sc;
};
StepSetCase step_set_case(const std::string& model, const std::string& profile, const std::string& name, Keys keys,
                          const std::string& origin,
                          const std::string& backend = "deepspeed");

// The set's defaults followed by the case's keys.
Keys case_keys(const ValidationSet& set, const SetCase& c);

}  // namespace ulysses::eval
