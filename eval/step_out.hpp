#pragma once
// The deepspeed backend in run/compare/capacity/validate: its flags (--layers,
// --expandable-segments), the scenario with the layer override, running the worker with its errors
// mapped to exit codes, and the measurement / comparison as tables and JSON.
#include <string>
#include <utility>
#include <vector>

#include "cli/options.hpp"
#include "eval/step_compare.hpp"
#include "eval/step_record.hpp"
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

// One case of a step validation or capacity set (or of its stored record): the defaults and case
// keys as given, the worker options split off, the scenario built and checked (including what the
// deepspeed backend refuses) before anything runs. InputError naming origin and the case.
struct StepSetCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> keys;  // as given (run.* included): what a record stores
  eval::RunKeys run;
  Scenario sc;
};
StepSetCase step_set_case(const std::string& model, const std::string& profile, const std::string& name,
                          std::vector<std::pair<std::string, std::string>> keys, const std::string& origin);

std::string step_table(const runtime::deepspeed::StepMeasurement& m);
std::string step_compare_table(const eval::StepComparison& c);
// Chrome/Perfetto trace: the predicted step (the step model's phases back to back) and the measured
// one (per rank, the last timed step's exclusive segments), as `compare --backend cuda` writes the block.
reports::Json step_trace(const Prediction& p, const runtime::deepspeed::StepMeasurement& m);

}  // namespace ulysses::cli
