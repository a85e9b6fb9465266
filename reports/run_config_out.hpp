#pragma once
// Run configs out: the HF Accelerate config YAML and the DeepSpeed config JSON of a plan
// (`ulysses plan --emit DIR`, ready for `accelerate launch --config_file`), and the echo of the run
// configs read (sim/run_config.hpp) as text and JSON. Format: docs/INPUTS.md "Run configs".
#include <string>
#include <vector>

#include "reports/json_out.hpp"
#include "sim/run_config.hpp"
#include "sim/scenario.hpp"

namespace ulysses::reports {

inline constexpr const char* kAccelerateConfigName = "accelerate_config.yaml";
inline constexpr const char* kDeepSpeedConfigName = "ds_config.json";

// The DeepSpeed dict the deepspeed backend's worker builds for this plan
// (runtime/deepspeed/ulysses_worker/dsconfig.py deepspeed_config), less its logging keys
// steps_per_print and wall_clock_breakdown. tests/deepspeed/test_emit_agrees.py checks it.
Json deepspeed_config_json(const Scenario& sc);
// The Accelerate YAML: DEEPSPEED, num_processes/num_machines, deepspeed_config_file = ds_file
// (relative to the YAML's folder), parallelism_config (the worker's parallelism_kwargs and fixed
// sp_handler_kwargs), and comments naming the plan keys no config key carries.
std::string accelerate_config_yaml(const Scenario& sc, const std::string& ds_file);

// What the configs cannot express, and a DIR that cannot take the files: InputError naming --emit
// (checked before the search).
void check_emittable(const Scenario& sc, const std::string& dir);
// Writes DIR/ds_config.json, then DIR/accelerate_config.yaml (each atomically; DIR is created).
// Returns the two paths. Throws std::runtime_error when a file cannot be written.
std::vector<std::string> emit_run_configs(const std::string& dir, const Scenario& sc);

// "read from FILE:" blocks, one line per key: "  key = value -> target = v (note)".
std::string run_config_echo_text(const RunConfigRead& rc);
// [{file, key, value, target, set_to, note}, ...]
Json run_config_echo_json(const RunConfigRead& rc);

}  // namespace ulysses::reports
