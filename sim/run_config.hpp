#pragma once
// Run configs in: an HF Accelerate 1.15 config YAML (what `accelerate config` writes, plus its
// parallelism_config) and a DeepSpeed 0.19 config JSON, mapped onto scenario keys with every key
// echoed. Precedence: scenario < Accelerate YAML < DeepSpeed JSON < command-line flags.
// Mapping, defaults and sources: docs/INPUTS.md "Run configs". Writers: reports/run_config_out.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// One key read from a run config, as echoed by plan and predict.
struct RunConfigKey {
  std::string file;    // the file it was read from
  std::string key;     // dotted key in that file (deepspeed_config.zero_stage, zero_optimization.stage)
  std::string value;   // as written ("{...}" for a map that is not used)
  std::string target;  // the scenario key it set (plan.zero_stage, gpus); "" = it sets none
  std::string set_to;  // the value given to target (cpu -> true, auto -> hidden^2)
  std::string note;    // "default", "auto: ...", "checked", "not used", "overridden by ..."
};

// What reading the run configs found: the echo, plus the facts the batch-size check needs after
// the command-line flags are applied (check_run_configs).
struct RunConfigRead {
  std::vector<RunConfigKey> keys;
  std::string ds_file;               // the DeepSpeed JSON read ("" = none)
  std::int64_t num_processes = 0;    // from the Accelerate YAML; 0 = not given
  std::int64_t sp_size = 0;          // sp size the configs give; 0 = not given
  std::int64_t train_batch_size = 0; // numeric values of the DeepSpeed JSON; 0 = absent or auto
  std::int64_t micro_batch_size = 0;
  std::int64_t grad_accum = 0;
  bool empty() const { return keys.empty(); }
};

// Reads the Accelerate YAML (accelerate_yaml, "" = none) and the DeepSpeed JSON (deepspeed_json,
// "" = the one the YAML names, if any) into sc. A JSON named both by the YAML and by the argument
// must be the same file. sc.model must be set (reduce_bucket_size "auto" is hidden^2). Throws
// InputError naming file and key on anything unsupported or inconsistent.
RunConfigRead apply_run_configs(Scenario& sc, const std::string& accelerate_yaml, const std::string& deepspeed_json);

// After the flags: DeepSpeed's batch rule train_batch_size == micro * accumulation * (world / sp),
// with the world size and sp of the configs where they give them, else of sc.
void check_run_configs(const RunConfigRead& rc, const Scenario& sc);

// A later source (a flag) set `target`: marks the entries that set it as overridden by `by`.
void mark_overridden(RunConfigRead& rc, const std::string& target, const std::string& by);

// An error of validate() whose key a run config set (and no flag overrode): throws the same error
// naming that file and key. Returns otherwise.
void throw_if_from_run_config(const core::InputError& e, const RunConfigRead& rc);

}  // namespace ulysses
