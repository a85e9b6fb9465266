#pragma once
// What `run`, `compare` and `calibrate` share: the backend and iteration flags, the block shape
// of a scenario (checked, with user errors as InputError), opening a backend, and the
// measurement as a table and as JSON.
#include <memory>
#include <string>

#include "cli/options.hpp"
#include "reports/json_out.hpp"
#include "runtime/backend.hpp"

namespace ulysses::cli {

// --backend cpu|cuda, --warmup N, --iters N, --seed N
void add_runtime_options(po::options_description& d);
runtime::RunOptions run_options_of(const po::variables_map& vm);  // InputError on bad counts
std::string backend_of(const po::variables_map& vm);

// The block shape of a validated scenario; InputError naming the scenario file (or flag) and key
// when the runtime rules or the backend's size limit refuse it.
runtime::BlockShape block_shape_checked(const Scenario& sc, const po::variables_map& vm, const std::string& backend);

// make_backend() with the CUDA backend registered when this binary has it; unknown or
// unavailable names become an InputError on --backend.
std::unique_ptr<runtime::Backend> open_backend(const std::string& name);

// Phases (median/min/max in us), exchanged bytes, peak memory per rank, and every check with
// its #wrong, nccl-tests style.
std::string measurement_table(const runtime::Measurement& m);
reports::Json measurement_json(const runtime::Measurement& m);

std::string origin_of(const po::variables_map& vm);  // the --scenario file, or "" (command line)

}  // namespace ulysses::cli
