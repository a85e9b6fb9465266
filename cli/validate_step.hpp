#pragma once
// `ulysses validate` for whole steps on the deepspeed backend: run a set into a record, or
// re-predict a stored step record (format ulysses-step-validation/1). Library work is in
// eval/step_record.hpp; this file reads flags and prints.
#include <string>

#include "cli/options.hpp"
#include "reports/json_out.hpp"

namespace ulysses::cli {

bool is_step_record(const reports::Json& j);  // format ulysses-step-validation/1
int run_step_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command);
int run_step_stored(const po::variables_map& vm, const reports::Json& rec, const std::string& path);

}  // namespace ulysses::cli
