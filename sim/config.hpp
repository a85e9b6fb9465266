#pragma once
// YAML inputs, strictly validated: model presets (scenarios/models/*.yaml), hardware profiles
// (profiles/*.yaml), scenarios (scenarios/*.yaml) and sweep specs. Every error is an
// InputError naming file, key and rule (core/errors.hpp). Format: docs/INPUTS.md.
#include <filesystem>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses {

// name_or_path: a preset name ("llama-3.1-8b" -> <repo>/scenarios/models/llama-3.1-8b.yaml)
// or a path to a .yaml file.
ModelSpec load_model(const std::string& name_or_path);
HardwareProfile load_profile(const std::string& name_or_path);  // <repo>/profiles/<name>.yaml
// The file load_profile reads for name_or_path; InputError keyed `key` (the flag) when none.
std::string profile_file(const std::string& name_or_path, const std::string& key);
Scenario load_scenario(const std::string& path);

// Set one scenario key by its dotted YAML path ("plan.sp_size", "model", "profile", "gpus",
// "workload.causal", "model.heads", ...) from its text value; origin names the file or flag
// in errors. Throws InputError for unknown keys and bad values.
void set_key(Scenario& sc, const std::string& key, const std::string& value, const std::string& origin);

// Cross-key rules: dp_replicate*dp_shard*sp == gpus, head divisibility, S % P without padding,
// zero_stage range, offload_params needs zero_stage 3, ... Throws InputError.
void validate(const Scenario& sc, const std::string& origin);
// Same rules, returns "" when valid, else the rule (for sweeps, which count reasons).
std::string check(const Scenario& sc);

std::string to_yaml(const Scenario& sc);  // loadable by load_scenario (round trip)
// The YAML text of a profile's `calibrated:` section (the `calibrated:` line included).
std::string calibration_to_yaml(const Calibration& c);

// Every dotted key set_key accepts (scenario, plan, workload, model.*, profile.*), file order.
const std::vector<std::string>& settable_keys();
// Values accepted for plan.attn_implementation (and as keys of calibrated attention curves).
const std::vector<std::string>& attn_implementations();

// Sweep spec: base scenario (inline or `base: file.yaml`) plus named axes over any key.
struct SweepAxis {
  std::string key;                  // dotted key accepted by set_key
  std::vector<std::string> values;  // list, or expanded from {geometric: {start, stop, factor}}
};
struct SweepSpec {
  std::string name;
  std::string path;
  Scenario base;
  std::vector<SweepAxis> axes;
  std::string mode = "predict";     // "predict" (at seq_len) or "plan" (longest that fits)
  std::int64_t granularity = 1024;  // for mode: plan
};
SweepSpec load_sweep(const std::string& path);

// Where presets (scenarios/models, profiles), scenarios and the runtime's scripts are looked up, in
// order (docs/INPUTS.md "Where presets are found"): $ULYSSES_HOME when set; else, from the running
// executable, <exe>/../share/ulysses (an install), the checkout it was built from when it still lives in
// that build tree, a checkout above the executable. Throws InputError naming where it looked.
std::string repo_dir();
struct DataDir {
  std::string path;    // "" when nothing was found
  std::string looked;  // where it looked, for the error
};
DataDir find_data_dir(const std::filesystem::path& exe);  // the executable-relative part of repo_dir()

}  // namespace ulysses
