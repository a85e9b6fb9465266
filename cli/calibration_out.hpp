#pragma once
// Where `ulysses calibrate` (cpu and cuda) puts its result: with --profile-out FILE, the base
// profile (--profile) copied to FILE with the `calibrated:` section written into it; without,
// the section printed as YAML.
#include <string>

#include "cli/options.hpp"
#include "sim/scenario.hpp"

namespace ulysses::cli {

void write_calibration_output(const po::variables_map& vm, const std::string& profile_name, const Calibration& c);

}  // namespace ulysses::cli
