#pragma once
// `ulysses capacity --backend deepspeed`: the longest sequence of whole steps, bisected on the GPU
// under a ballast next to the planner's answer (eval/step_capacity.hpp), and its stored record
// (format ulysses-step-capacity/1) re-predicted on any machine.
#include <cstdint>
#include <string>

#include "cli/options.hpp"
#include "reports/json_out.hpp"

namespace ulysses::cli {

bool is_step_capacity_record(const reports::Json& j);
int run_step_capacity_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command);
int run_step_capacity_stored(const po::variables_map& vm, const reports::Json& rec, const std::string& path);

}  // namespace ulysses::cli
