#pragma once
// The deepspeed backend in run/compare/capacity/validate: its flags (--layers,
// --expandable-segments), the scenario with the layer override, running the worker with its errors
// mapped to exit codes, and the measurement / comparison as tables and JSON.
#include <string>

#include "cli/options.hpp"
#include "eval/step_compare.hpp"
#include "reports/json_out.hpp"
#include "runtime/deepspeed/step_run.hpp"

namespace ulysses::cli {

// --layers N, --expandable-segments true|false
void add_step_options(po::options_description& d);
bool is_step_backend(const std::string& backend);  // "deepspeed"
// InputError when --layers / --expandable-segments are given to a block backend.
void refuse_step_options(const po::variables_map& vm, const std::string& backend);
// --layers applied to the scenario (InputError when <= 0 or above the model's layers).
Scenario with_layers(Scenario sc, const po::variables_map& vm);
runtime::deepspeed::StepOptions step_options_of(const po::variables_map& vm);  // warmup/iters/seed too

std::string step_table(const runtime::deepspeed::StepMeasurement& m);
reports::Json step_json(const runtime::deepspeed::StepMeasurement& m);
std::string step_compare_table(const eval::StepComparison& c);
reports::Json step_compare_json(const eval::StepComparison& c);

}  // namespace ulysses::cli
