#pragma once
// What running the attention block on a backend needs and gives (`run`, `compare`, `validate`,
// `bench`): the block shape of a scenario (checked, with user errors as InputError), opening a
// backend, and the measurement as a table and as JSON.
#include <memory>
#include <string>

#include "reports/json_out.hpp"
#include "runtime/backend.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// The block shape of a validated scenario; InputError naming origin (the scenario file, or "" for
// the command line) and the key when the runtime rules or the backend's size limit refuse it.
runtime::BlockShape block_shape_checked(const Scenario& sc, const std::string& origin, const std::string& backend);

// make_backend() with the CUDA backend registered when this binary has it; unknown or
// unavailable names become an InputError on --backend.
std::unique_ptr<runtime::Backend> open_backend(const std::string& name);

// Phases (median/min/max in us), exchanged bytes, peak memory per rank, and every check with
// its #wrong, nccl-tests style.
std::string measurement_table(const runtime::Measurement& m);
reports::Json measurement_json(const runtime::Measurement& m);

}  // namespace ulysses::eval
